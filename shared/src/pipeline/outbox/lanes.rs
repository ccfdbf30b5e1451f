//! Lanes: every job runs in one. New tickets are `interactive`; reprocessing, redrives, evals
//! and backfills are `bulk`, work that may wait (and may use a provider's cheaper tiers). A
//! claim serves interactive work first; bulk work takes at most its share of a claim while
//! interactive work is waiting, and all of it when none is. Every call then takes its slot in
//! the one shared rate limit, so bulk's share of the claims is its share of the limit.

use std::{fmt, str::FromStr};

use crate::{
    config::{WorkerPolicy, DEFAULT_BULK_SHARE},
    domain::error::InvalidRequest,
    pipeline::pause::Paused,
    providers::Tier,
};

/// How a claim shares itself between the lanes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lanes {
    /// `TRIAGE_BULK_SHARE`.
    pub bulk_share: f64,
    /// Bulk work goes to provider batches: an online claim takes only the bulk jobs that came
    /// back from one (`online_only`).
    pub bulk_in_batches: bool,
    /// The lanes an operator paused: claimed from by no one.
    pub paused: Paused,
    /// Eval work only (`workload = 'eval'`): the workers `triage eval` runs in its own process,
    /// which may be pointed at production's database and must not answer its tickets.
    pub eval_only: bool,
}

impl Default for Lanes {
    fn default() -> Self {
        Self {
            bulk_share: DEFAULT_BULK_SHARE,
            bulk_in_batches: false,
            paused: Paused::default(),
            eval_only: false,
        }
    }
}

impl Lanes {
    pub fn from_policy(policy: &WorkerPolicy, paused: Paused) -> Self {
        Self {
            bulk_share: policy.bulk_share,
            bulk_in_batches: policy.bulk_tier == Tier::Batch,
            paused,
            eval_only: false,
        }
    }
}

/// The lane a job runs in (`evaluation_outbox.lane`, `provider_call.lane`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Lane {
    #[default]
    Interactive,
    Bulk,
}

impl Lane {
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Interactive => "interactive",
            Lane::Bulk => "bulk",
        }
    }

    /// The lane as stored; anything else is the database's CHECK constraint's to refuse, so
    /// it reads as the default.
    pub fn from_stored(stored: &str) -> Self {
        match stored {
            "bulk" => Lane::Bulk,
            _ => Lane::Interactive,
        }
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A lane as an operator names it (`--lane`, `"lane"`): exactly one of the two names.
impl FromStr for Lane {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Lane::Interactive, Lane::Bulk]
            .into_iter()
            .find(|lane| lane.as_str() == s)
            .ok_or_else(|| {
                InvalidRequest::new("lane", format!("{s:?} is not a lane: interactive or bulk"))
            })
    }
}

/// How many bulk jobs a claim of `batch` may take once `interactive` interactive jobs were
/// claimed: the rest of the claim when no interactive work was waiting, else at most
/// `bulk_share` of the claim (rounded down) and never more than is left.
pub fn bulk_allowance(batch: i64, interactive: i64, bulk_share: f64) -> i64 {
    let room = (batch - interactive).max(0);
    if interactive == 0 {
        return room;
    }
    let share = (batch as f64 * bulk_share.clamp(0.0, 1.0)).floor() as i64;
    room.min(share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_takes_all_of_an_idle_claim_and_at_most_its_share_while_interactive_waits() {
        // (batch, interactive claimed, share, bulk allowed)
        let table = [
            (10, 0, 0.5, 10),
            (10, 0, 0.0, 10),
            (10, 10, 0.5, 0),
            (10, 1, 0.5, 5),
            (10, 4, 0.5, 5),
            (10, 6, 0.5, 4),
            (10, 9, 0.5, 1),
            (10, 3, 0.2, 2),
            (10, 3, 0.0, 0),
            (10, 3, 1.0, 7),
            (1, 1, 0.5, 0),
            (1, 0, 0.5, 1),
            (3, 1, 0.5, 1),
            (10, 12, 0.5, 0),
            (10, 2, 7.0, 8),
        ];
        for (batch, interactive, share, bulk) in table {
            assert_eq!(
                bulk_allowance(batch, interactive, share),
                bulk,
                "batch {batch}, interactive {interactive}, share {share}"
            );
        }
    }

    #[test]
    fn lanes_read_back_as_stored() {
        for lane in [Lane::Interactive, Lane::Bulk] {
            assert_eq!(Lane::from_stored(lane.as_str()), lane);
        }
    }

    #[test]
    fn an_operator_names_a_lane_exactly_or_is_refused() {
        assert_eq!("interactive".parse::<Lane>().unwrap(), Lane::Interactive);
        assert_eq!("bulk".parse::<Lane>().unwrap(), Lane::Bulk);
        for bad in ["", "Bulk", "fast", " bulk", "interactive,bulk"] {
            let refused = bad.parse::<Lane>().unwrap_err();
            assert_eq!(refused.field, "lane", "{bad:?}");
            assert!(refused.reason.contains("interactive or bulk"), "{bad:?}");
        }
    }
}
