//! The dead letter state: permanent failures, contract violations and exhausted attempts.
//! Not a graveyard: `reason` groups the report, `last_error` says what happened.

use tokio_postgres::GenericClient;

use super::{bounded, ClaimedJob, Fencing};
use crate::error::Result;

const DEAD_LETTER: &str = r#"
UPDATE evaluation_outbox
SET status = 'dead', finished_at = now(),
    locked_by = NULL, locked_until = NULL, claim_token = NULL,
    last_error = $3, error_class = $4
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
"#;

pub async fn dead_letter(
    client: &impl GenericClient,
    job: &ClaimedJob,
    error: &str,
    reason: &str,
) -> Result<Fencing> {
    let rows = client
        .execute(
            DEAD_LETTER,
            &[&job.id.0, &job.claim_token, &bounded(error), &reason],
        )
        .await?;
    Ok(Fencing::from_rows(rows))
}
