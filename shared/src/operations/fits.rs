//! What the ops Lambda's memory holds (issue "Round four", items 2 and 3; issue 39, item 4):
//! a training is made to fit, its examples gathered within a budget in bytes derived from the
//! memory where it runs ([`training_budget`]: the function's, or the machine's for the CLI),
//! the rows beyond it left out and counted; an eval whose set cannot fit the function's memory
//! is refused before it runs, with what it needs and what to do instead; every list of a
//! request is bounded (no local file is a set there either: `checks::no_local_files`). The CLI
//! runs where its operator chose: an eval's set is not refused there.

use serde::Serialize;

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
/// What a training holds whatever its examples, out of the work's share: the classifier's
/// weights and AdaGrad's sums twice (the holdout's fit and the final one run side by side,
/// 4.5 MB each at most), the features' buffers, and the artefact's copies (up to 5 MB each)
/// as it is versioned and stored.
const TRAINING_RESERVE_BYTES: u64 = 24 << 20;

/// What a piece of work holds in memory: rows and the bytes of their text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub rows: u64,
    pub text_bytes: u64,
}

/// How much memory a kind of work needs for what it holds: conservative estimates from what
/// the work copies (docs/runbook.md "What the ops Lambda refuses").
#[derive(Debug, Clone, Copy)]
pub struct Footprint {
    pub what: &'static str,
    /// Bytes per byte of text: the row as read, the ticket made of it.
    pub per_text_byte: u64,
    /// Bytes per row beside its text: a key, a job.
    pub per_row: u64,
}

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

/// What a training may hold of examples where it runs (`gather::cost` of each): the work's
/// share of the memory, less what training holds whatever its examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budget {
    /// Whose memory: `"ops function"` (`OpsMemorySize`, from the invocation's context) or
    /// `"this machine"` (what the CLI's machine has available as it starts).
    pub of: &'static str,
    pub memory_mb: u64,
    /// Bytes the examples may hold.
    pub bytes: u64,
}

/// The budget of a training run by `operator`; `None` where the memory is not known (no
/// bound then but the rows').
pub fn training_budget(operator: &Operator) -> Option<Budget> {
    let (of, memory_mb) = match operator.lambda_host() {
        Some(LambdaHost { memory_mb }) => (
            "ops function",
            u64::from(memory_mb.unwrap_or(DEFAULT_LAMBDA_MEMORY_MB)),
        ),
        None => ("this machine", available_memory_mb()?),
    };
    let usable = (memory_mb as f64 * USABLE_SHARE * MIB) as u64;
    Some(Budget {
        of,
        memory_mb,
        bytes: usable.saturating_sub(TRAINING_RESERVE_BYTES),
    })
}

/// `MemAvailable` of `/proc/meminfo`, in MB.
fn available_memory_mb() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim();
    Some(kb.parse::<u64>().ok()? / 1024)
}

const MIB: f64 = 1024.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trainings_budget_is_the_work_share_of_its_memory_less_the_classifiers_own() {
        let lambda = |mb| training_budget(&Operator::lambda("arn", "r").with_memory_mb(mb));
        let deployed = lambda(256).unwrap();
        assert_eq!((deployed.of, deployed.memory_mb), ("ops function", 256));
        // 256 MB: about 130 MB of examples, some 15,000 of the longest (8 KiB of text each).
        assert_eq!(deployed.bytes, ((256.0 * 0.6 * MIB) as u64) - (24 << 20));
        assert!(lambda(128).unwrap().bytes < deployed.bytes);
        // Not told: the template's default.
        let untold = training_budget(&Operator::lambda("arn", "r")).unwrap();
        assert_eq!(untold, deployed);
        // Too small a function holds no example, rather than overflowing.
        assert_eq!(lambda(32).unwrap().bytes, 0);
        // The CLI's is the machine's, where the kernel says.
        if let Some(cli) = training_budget(&Operator::os_user()) {
            assert_eq!(cli.of, "this machine");
        }
    }

    #[test]
    fn an_eval_whose_set_cannot_fit_the_deployed_function_is_refused() {
        let lambda = Operator::lambda("arn", "r").with_memory_mb(256);
        let huge = Work {
            rows: 300_000,
            text_bytes: 300_000 * 20_000,
        };
        let refused = fits(&lambda, "set", EVAL, huge, "a smaller set").unwrap_err();
        assert!(refused.to_string().contains("256 MB"), "{refused}");
        let shipped = Work {
            rows: 661,
            text_bytes: 661 * 400,
        };
        assert!(fits(&lambda, "set", EVAL, shipped, "").is_ok());
        // The CLI runs where its operator chose.
        assert!(fits(&Operator::os_user(), "set", EVAL, huge, "").is_ok());
    }
}
