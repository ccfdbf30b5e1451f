//! Sending a job back to the queue: `reschedule` after a transient failure (the attempt is
//! spent, `available_at` follows the backoff), `release` when the fault is the provider's as a
//! whole or the invocation ran out of time (the attempt is given back).

use std::time::Duration;

use tokio_postgres::GenericClient;

use super::{bounded, ClaimedJob, Fencing};
use crate::error::Result;

const RESCHEDULE: &str = r#"
UPDATE evaluation_outbox
SET status = 'pending', available_at = now() + make_interval(secs => $3),
    locked_by = NULL, locked_until = NULL, claim_token = NULL,
    last_error = $4, error_class = $5
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
"#;

const RELEASE: &str = r#"
UPDATE evaluation_outbox
SET status = 'pending', available_at = now() + make_interval(secs => $3),
    locked_by = NULL, locked_until = NULL, claim_token = NULL,
    attempts = greatest(attempts - 1, 0),
    last_error = coalesce($4, last_error)
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
"#;

pub async fn reschedule(
    client: &impl GenericClient,
    job: &ClaimedJob,
    delay: Duration,
    error: &str,
    reason: &str,
) -> Result<Fencing> {
    let rows = client
        .execute(
            RESCHEDULE,
            &[
                &job.id.0,
                &job.claim_token,
                &delay.as_secs_f64(),
                &bounded(error),
                &reason,
            ],
        )
        .await?;
    Ok(Fencing::from_rows(rows))
}

/// Back to the queue without spending the attempt the claim counted.
pub async fn release(
    client: &impl GenericClient,
    job: &ClaimedJob,
    delay: Duration,
    error: Option<&str>,
) -> Result<Fencing> {
    let error = error.map(bounded);
    let rows = client
        .execute(
            RELEASE,
            &[&job.id.0, &job.claim_token, &delay.as_secs_f64(), &error],
        )
        .await?;
    Ok(Fencing::from_rows(rows))
}
