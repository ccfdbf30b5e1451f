//! The attempt ledger: one row per provider call, inserted *before* the call and completed
//! after it. A crash in between leaves an `in_flight` row: "outcome unknown, possibly billed",
//! costed at the call's reserved estimate. Billed calls per key are read from here; the money
//! from the running totals a trigger keeps beside it (`provider_call_hour`, migration V9), so
//! no read scans the day. Every call writes twice, so both statements are prepared once per
//! connection (deadpool's statement cache). Every statement on `provider_call` is here.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use crate::{
    domain::error::Result,
    evaluate::{FailureKind, Usage},
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
}

impl CallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Failed(kind) => kind.reason(),
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
    /// `None` keeps the reserved estimate the row was started with (outcome unknown).
    pub cost_usd: Option<f64>,
    pub latency: Duration,
}

/// Records the call about to be made, costed at `estimate_usd` (its worst case) until its
/// usage is known, unless a result for the job's key exists (article step 4, the line that
/// saves money): `None` then, and no call is to be made. One statement, so the dedup check
/// costs no round trip of its own.
pub async fn start_call_unless_evaluated(
    client: &impl GenericClient,
    job: &ClaimedJob,
    (worker, provider): (&str, &str),
    estimate_usd: f64,
) -> Result<Option<CallId>> {
    let statement = client
        .prepare_cached(
            r#"
            INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, model_version, prompt_version, cost_usd)
            SELECT $1, $2, $3, $4, $5, $6, $7, $8::float8::numeric
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
                &estimate_usd,
            ],
        )
        .await?;
    Ok(row.map(|row| CallId(row.get(0))))
}

/// Completes the call's row; the running totals move by what it changed, so a repeat after a
/// blink changes nothing.
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
                input_tokens = $6, output_tokens = $7, cost_usd = coalesce($8::float8::numeric, cost_usd), latency_ms = $9
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
                    CallOutcome::Ok => None,
                    CallOutcome::Failed(kind) => Some(kind.class().name()),
                },
                &record.http_status.map(i32::from),
                &record.billed,
                &record.usage.input_tokens,
                &record.usage.output_tokens,
                &record.cost_usd,
                &(record.latency.as_millis().min(i32::MAX as u128) as i32),
            ],
        )
        .await?;
    Ok(())
}

/// What a ledger row says once the content it was for is erased: the key is a digest of the
/// text, so it goes; the money (cost, tokens, model, time) stays for the budget and reports.
pub const ERASED_KEY: &str = "erased";

/// Erasure: the calls for `keys` keep their money and lose the key. Returns the rows changed.
pub async fn forget_keys(client: &impl GenericClient, keys: &[String]) -> Result<i64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let forgotten = client
        .execute(
            "UPDATE provider_call SET idempotency_key = $2 WHERE idempotency_key = ANY($1)",
            &[&keys, &ERASED_KEY],
        )
        .await?;
    Ok(forgotten as i64)
}
