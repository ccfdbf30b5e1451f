//! What the ops Lambda's memory holds (issue "Round four", items 2 and 3): work whose data
//! cannot fit the function's memory is refused before it is read, with what it needs and what
//! to do instead; every list of a request is bounded (no local file is a set there either:
//! `checks::no_local_files`). The CLI runs where its operator chose, with the
//! memory of that machine: only the lists' bounds hold there.

use super::audit::{LambdaHost, Operator};
use crate::domain::error::InvalidRequest;

/// Most versions one eval compares (each one a run of the whole set).
pub const MAX_EVAL_VERSIONS: i64 = 8;
/// Most sources one training reads.
pub const MAX_TRAIN_SOURCES: i64 = 8;
/// The template's `OpsMemorySize` default, assumed when the invocation's context does not say.
const DEFAULT_LAMBDA_MEMORY_MB: u32 = 256;
/// The share of the function's memory the work may take: the runtime, the binary, the pool and
/// the response take the rest.
const USABLE_SHARE: f64 = 0.6;

/// What a piece of work holds in memory: rows and the bytes of their text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub rows: u64,
    pub text_bytes: u64,
}

impl Work {
    pub fn and(self, other: Work) -> Work {
        Work {
            rows: self.rows + other.rows,
            text_bytes: self.text_bytes + other.text_bytes,
        }
    }
}

/// How much memory a kind of work needs for what it holds: conservative estimates from what
/// the work copies (not measured yet; docs/runbook.md "What the ops Lambda refuses").
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    pub what: &'static str,
    /// Bytes per byte of text: the row as read, the example or ticket made of it, its tokens.
    pub per_text_byte: u64,
    /// Bytes per row beside its text: the features and counts of one example, a key, a job.
    pub per_row: u64,
}

/// Training: each example's text read, copied, tokenised into features and counted.
pub const TRAINING: Footprint = Footprint {
    what: "training",
    per_text_byte: 6,
    per_row: 2048,
};

/// An eval: the set as parsed, each row's ticket and keys.
pub const EVAL: Footprint = Footprint {
    what: "this eval",
    per_text_byte: 3,
    per_row: 1024,
};

impl Footprint {
    pub fn bytes(&self, work: Work) -> u64 {
        work.text_bytes
            .saturating_mul(self.per_text_byte)
            .saturating_add(work.rows.saturating_mul(self.per_row))
    }
}

/// Refuses, in the ops Lambda, `work` that would not fit the function's memory. `instead`
/// says what to do (fewer days, a smaller set).
pub fn fits(
    operator: &Operator,
    field: &str,
    footprint: Footprint,
    work: Work,
    instead: &str,
) -> Result<(), InvalidRequest> {
    let Some(LambdaHost { memory_mb }) = operator.lambda_host() else {
        return Ok(());
    };
    let memory_mb = memory_mb.unwrap_or(DEFAULT_LAMBDA_MEMORY_MB);
    let usable = (f64::from(memory_mb) * USABLE_SHARE * MIB) as u64;
    let needed = footprint.bytes(work);
    if needed <= usable {
        return Ok(());
    }
    Err(InvalidRequest::new(
        field,
        format!(
            "{} needs about {:.0} MB ({} rows, {:.1} MB of ticket text) and this function has \
             {memory_mb} MB, of which about {:.0} MB for the work: {instead}, or run it with \
             the triage CLI on a machine with more memory, or raise the OpsMemorySize parameter",
            footprint.what,
            needed as f64 / MIB,
            work.rows,
            work.text_bytes as f64 / MIB,
            usable as f64 / MIB,
        ),
    ))
}

const MIB: f64 = 1024.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_training_the_old_bound_allowed_never_fits_the_deployed_function() {
        let lambda = Operator::lambda("arn", "r").with_memory_mb(256);
        let huge = Work {
            rows: 300_000,
            text_bytes: 300_000 * 20_000,
        };
        let refused = fits(&lambda, "from", TRAINING, huge, "fewer days").unwrap_err();
        assert!(refused.to_string().contains("256 MB"), "{refused}");
        let shipped = Work {
            rows: 661,
            text_bytes: 661 * 400,
        };
        assert!(fits(&lambda, "from", TRAINING, shipped, "").is_ok());
        // The CLI runs where its operator chose.
        assert!(fits(&Operator::os_user(), "from", TRAINING, huge, "").is_ok());
    }
}
