//! The identities of the pipeline's rows that more than one of its parts hold: a job of the
//! outbox, and a call of the ledger (which the outbox's batch submissions name too).

use chrono::{DateTime, Utc};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutboxId(pub i64);

/// A call's ledger row: the ledger is partitioned by `started_at` (migration V14), so its key
/// and the finish's lookup carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallId {
    pub id: i64,
    pub started_at: DateTime<Utc>,
}
