//! Finishing a job: result and completion in one statement (article step 4, rule 8), or,
//! when the result already exists, completion alone (the dedup hit that saves a call).
//! Every job runs these, so their statements are prepared once per connection (deadpool's
//! statement cache) instead of on every call.

use deadpool_postgres::GenericClient;

use super::{ClaimedJob, Fencing};
use crate::{config::Versions, error::Result, evaluate::Evaluation};

/// Closes the job if this worker still holds it: `$1` id, `$2` claim token, `$3` how it
/// finished. A macro so the statement below can embed it.
macro_rules! mark_done {
    () => {
        r#"
UPDATE evaluation_outbox
SET status = 'done', finished_by = $3, finished_at = now(),
    locked_by = NULL, locked_until = NULL, last_error = NULL, error_class = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
"#
    };
}

const MARK_DONE: &str = mark_done!();

/// One statement, so one round trip and one transaction: the result is stored only if the job
/// was still ours to close. Answers how many jobs it closed (0: fenced out, nothing stored).
const STORE_RESULT_AND_MARK_DONE: &str = concat!(
    "WITH done AS (",
    mark_done!(),
    r#"    RETURNING id
), stored AS (
    INSERT INTO evaluation_result
        (idempotency_key, ticket_id, is_urgent, department, urgency_score,
         model_version, prompt_version, policy_version)
    SELECT $4, $5, $6, $7, $8, $9, $10, $11 FROM done
    ON CONFLICT (idempotency_key) DO NOTHING
)
SELECT count(*) FROM done
"#
);

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
    client: &impl GenericClient,
    job: &ClaimedJob,
    evaluation: &Evaluation,
    versions: &Versions,
) -> Result<Fencing> {
    let statement = client.prepare_cached(STORE_RESULT_AND_MARK_DONE).await?;
    let row = client
        .query_one(
            &statement,
            &[
                &job.id.0,
                &job.claim_token,
                &"evaluated",
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
    Ok(Fencing::from_rows(row.get::<_, i64>(0) as u64))
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
