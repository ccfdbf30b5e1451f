//! The sweeper (article step 3, "o varredor"): returns expired leases to the queue. A lease
//! expiry means a worker died mid-job, so it counts as the attempt the claim already added;
//! at the maximum the job is dead-lettered as `lease_expired` instead of looping forever.

use deadpool_postgres::Pool;
use serde::Serialize;

use crate::{config::WorkerPolicy, db, error::Result};

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub leases_returned: i64,
    pub leases_dead_lettered: i64,
}

/// One conditional statement: a row that finished between any read and this write no longer
/// matches `status = 'processing'` when Postgres re-checks it under the row lock, so it is
/// never touched (the race of riverqueue/river#1302). Clearing the claim token fences the
/// late worker.
const RETURN_EXPIRED_LEASES: &str = r#"
WITH expired AS (
    UPDATE evaluation_outbox
    SET status       = CASE WHEN attempts >= $1 THEN 'dead' ELSE 'pending' END,
        finished_at  = CASE WHEN attempts >= $1 THEN now() END,
        available_at = now(),
        locked_by = NULL, locked_until = NULL, claim_token = NULL,
        last_error   = CASE WHEN attempts >= $1
                            THEN format('lease expired on attempt %s of %s (worker %s)', attempts, $1, locked_by)
                            ELSE format('lease expired (worker %s)', locked_by) END,
        error_class  = 'lease_expired'
    WHERE status = 'processing' AND locked_until < now()
    RETURNING status
)
SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'dead') FROM expired
"#;

pub async fn return_expired_leases(pool: &Pool, policy: &WorkerPolicy) -> Result<SweepReport> {
    let client = db::client(pool).await?;
    let row = client
        .query_one(RETURN_EXPIRED_LEASES, &[&policy.max_attempts])
        .await?;
    let report = SweepReport {
        leases_returned: row.get(0),
        leases_dead_lettered: row.get(1),
    };
    if report != SweepReport::default() {
        tracing::warn!(
            ?report,
            metric = "outbox.lease_expired",
            "expired leases swept"
        );
    }
    Ok(report)
}
