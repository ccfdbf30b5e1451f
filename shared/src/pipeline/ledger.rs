//! The attempt ledger: one row per provider call, inserted *before* the call and completed
//! after it. A crash in between leaves an `in_flight` row: "outcome unknown, possibly billed".
//! Billed calls per key and spend are read from here. Every call writes twice, so both
//! statements are prepared once per connection (deadpool's statement cache).

use std::time::Duration;

use deadpool_postgres::GenericClient;

use crate::{
    domain::error::Result,
    evaluate::{FailureKind, Tier, Usage},
    pipeline::outbox::ClaimedJob,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallId(pub i64);

/// How a call ended: an answer within the contract, or a failure (a contract violation
/// included), stored as its reason and class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Ok,
    Failed(FailureKind),
    /// A batch line the provider never ran (the batch expired or was cancelled): not billed.
    NotRun,
}

impl CallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Failed(kind) => kind.reason(),
            CallOutcome::NotRun => "not_run",
        }
    }
}

/// How a recorded call ended.
#[derive(Debug, Clone)]
pub struct CallRecord {
    pub outcome: CallOutcome,
    pub http_status: Option<u16>,
    /// `None` when nobody can know (a timeout the provider may have served).
    pub billed: Option<bool>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub latency: Duration,
}

/// Records the call about to be made, unless a result for the job's key exists (article step
/// 4, the line that saves money): `None` then, and no call is to be made. One statement, so
/// the dedup check costs no round trip of its own. The call takes its job's lane and
/// workload, so eval calls count against the budget but stay out of production reports.
pub async fn start_call_unless_evaluated(
    client: &impl GenericClient,
    job: &ClaimedJob,
    worker: &str,
    provider: &str,
    tier: Tier,
) -> Result<Option<CallId>> {
    let statement = client
        .prepare_cached(
            r#"
            INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, model_version, prompt_version, lane, workload, tier)
            SELECT $1, $2, $3, $4, $5, $6, $7,
                   coalesce((SELECT lane FROM evaluation_outbox WHERE id = $1), 'interactive'),
                   coalesce((SELECT workload FROM evaluation_outbox WHERE id = $1), 'production'),
                   $8
            WHERE NOT EXISTS (SELECT 1 FROM evaluation_result WHERE idempotency_key = $2)
            RETURNING id
            "#,
        )
        .await?;
    let row = client
        .query_opt(
            &statement,
            &[
                &job.id.0,
                &job.key.as_str(),
                &job.attempts,
                &worker,
                &provider,
                &job.versions.model_version,
                &job.versions.prompt_version,
                &tier.name(),
            ],
        )
        .await?;
    Ok(row.map(|row| CallId(row.get(0))))
}

pub async fn finish_call(
    client: &impl GenericClient,
    call: CallId,
    record: &CallRecord,
) -> Result<()> {
    let statement = client
        .prepare_cached(
            r#"
            UPDATE provider_call
            SET finished_at = now(), outcome = $2, error_class = $3, http_status = $4, billed = $5,
                input_tokens = $6, output_tokens = $7, cost_usd = $8::float8::numeric, latency_ms = $9,
                cached_input_tokens = $10, cache_write_tokens = $11
            WHERE id = $1
            "#,
        )
        .await?;
    client
        .execute(
            &statement,
            &[
                &call.0,
                &record.outcome.as_str(),
                &match record.outcome {
                    CallOutcome::Ok | CallOutcome::NotRun => None,
                    CallOutcome::Failed(kind) => Some(kind.class().name()),
                },
                &record.http_status.map(i32::from),
                &record.billed,
                &record.usage.input_tokens,
                &record.usage.output_tokens,
                &record.cost_usd,
                &(record.latency.as_millis().min(i32::MAX as u128) as i32),
                &record.usage.cached_input_tokens,
                &record.usage.cache_write_tokens,
            ],
        )
        .await?;
    Ok(())
}
