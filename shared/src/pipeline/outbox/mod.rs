//! The evaluation outbox: [`claim`] (article step 3) hands out [`ClaimedJob`]s, interactive
//! [`lanes`] first, and a claimed
//! job changes its own state through four fenced methods: complete, reschedule, release,
//! dead letter. Every write after the claim names the claim token; a worker whose lease
//! expired and was re-claimed changes nothing. [`lease`] holds what every queue table shares
//! (evaluations and deliveries): the claim's lease, the fenced writes, the expired-lease sweep;
//! [`renewal`] the short lease an invocation keeps renewing while it holds rows;
//! [`announce`] the delivery rows a stored result writes in its own statement.

pub(crate) mod announce;
pub mod budgeted;
pub mod claim;
mod job;
pub mod lanes;
pub mod lease;
pub mod renewal;
pub mod requeue;
pub mod submission;

pub use job::ClaimedJob;
pub use lanes::{Lane, Lanes};

pub use crate::domain::rows::OutboxId;

/// Which lane a job runs in and whose work it is (V7's `lane` and `workload` columns): a new
/// ticket is interactive production work; reprocess is bulk unless its operator chose
/// otherwise; `triage eval` is bulk eval work, kept out of every production report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    pub lane: Lane,
    pub workload: &'static str,
}

impl Work {
    pub const REPROCESS: Work = Work {
        lane: Lane::Bulk,
        workload: "production",
    };
    pub const EVAL: Work = Work {
        lane: Lane::Bulk,
        workload: "eval",
    };
}

/// Whether a fenced write still held the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Fencing {
    Held,
    /// The lease expired and the job was returned or re-claimed: nothing was written.
    Lost,
}

impl Fencing {
    pub(crate) fn from_rows(rows: u64) -> Self {
        if rows == 1 {
            Fencing::Held
        } else {
            Fencing::Lost
        }
    }
}
