//! Finishing a job: result and completion in one transaction (article step 4, rule 8), or,
//! when the result already exists, completion alone (the dedup hit that saves a call).
//! Every job runs these, so their statements are prepared once per connection (deadpool's
//! statement cache) instead of on every call.

use deadpool_postgres::{Client, GenericClient};

use super::{ClaimedJob, Fencing};
use crate::{config::Versions, error::Result, evaluate::Evaluation};

const MARK_DONE: &str = r#"
UPDATE evaluation_outbox
SET status = 'done', finished_by = $3, finished_at = now(),
    locked_by = NULL, locked_until = NULL, last_error = NULL, error_class = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
"#;

const INSERT_RESULT: &str = r#"
INSERT INTO evaluation_result
    (idempotency_key, ticket_id, is_urgent, department, urgency_score,
     model_version, prompt_version, policy_version)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (idempotency_key) DO NOTHING
"#;

/// Whether a result for this key exists already (article step 4, before any call).
pub async fn result_exists(client: &impl GenericClient, job: &ClaimedJob) -> Result<bool> {
    let statement = client
        .prepare_cached("SELECT 1 FROM evaluation_result WHERE idempotency_key = $1")
        .await?;
    let row = client.query_opt(&statement, &[&job.key.as_str()]).await?;
    Ok(row.is_some())
}

/// Stores the evaluation and closes the job, atomically. A fenced-out worker stores nothing.
pub async fn complete(
    client: &mut Client,
    job: &ClaimedJob,
    evaluation: &Evaluation,
    versions: &Versions,
) -> Result<Fencing> {
    let tx = client.transaction().await?;
    let mark_done = tx.prepare_cached(MARK_DONE).await?;
    let fencing = Fencing::from_rows(
        tx.execute(&mark_done, &[&job.id.0, &job.claim_token, &"evaluated"])
            .await?,
    );
    if fencing == Fencing::Lost {
        tx.rollback().await?;
        return Ok(fencing);
    }
    tx.execute(
        &tx.prepare_cached(INSERT_RESULT).await?,
        &[
            &job.key.as_str(),
            &job.ticket_id.0,
            &evaluation.is_urgent,
            &evaluation.department,
            &evaluation.urgency_score,
            &job.model_version,
            &job.prompt_version,
            &versions.policy,
        ],
    )
    .await?;
    tx.commit().await?;
    Ok(fencing)
}

/// Closes a job whose result already exists, without a model call.
pub async fn complete_from_existing_result(
    client: &impl GenericClient,
    job: &ClaimedJob,
) -> Result<Fencing> {
    let mark_done = client.prepare_cached(MARK_DONE).await?;
    Ok(Fencing::from_rows(
        client
            .execute(&mark_done, &[&job.id.0, &job.claim_token, &"dedup"])
            .await?,
    ))
}
