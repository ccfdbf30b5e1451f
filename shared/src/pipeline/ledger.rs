//! The attempt ledger: one row per provider call, inserted *before* the call and completed
//! after it. A crash in between leaves an `in_flight` row: "outcome unknown, possibly billed",
//! costed at the call's reserved estimate. Billed calls per key are read from here; the money
//! from the running totals a trigger keeps beside it (`provider_call_hour`, migration V9), so
//! no read scans the day. Every call writes twice, so both statements are prepared once per
//! connection (deadpool's statement cache). Every statement on `provider_call` is here.

use std::time::Duration;

use deadpool_postgres::GenericClient;

pub use crate::domain::rows::CallId;
use crate::{
    domain::error::Result,
    pipeline::{
        limits::rate_limit::{self, Pace, Take},
        outbox::ClaimedJob,
    },
    providers::{
        contract::{self, ContractViolation},
        Evaluation, FailureKind, Policy, PriceTable, ProviderReply, Tier, Usage,
    },
    telemetry::metric,
};

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
    /// `None` keeps the reserved estimate the row was started with (outcome unknown).
    pub cost_usd: Option<f64>,
    pub latency: Duration,
}

/// How a call's start went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Start {
    /// A result for the job's key exists: no call, and no slot taken (article step 4).
    Evaluated,
    /// The call's ledger row, and how long to wait for its slot.
    Call { call: CallId, wait: Duration },
    /// No slot opens within the wait allowed: no ledger row; the limit opens in `opens_in`.
    Full { opens_in: Duration },
}

/// The shared rate limit's part in a start: the pace, the call's estimated tokens and the
/// longest wait for a slot the caller can afford.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    pub pace: &'a Pace,
    pub tokens: i64,
    pub max_wait: Duration,
}

/// The dedup check, the slot (`$13`: only where a limit applies) and the ledger row, in one
/// statement, which also ends the job's budget reservation (the row now carries it). The row starts when its slot does, costed at `$14` (its reserved estimate).
const START: &str = concat!(
    r#"WITH fresh AS (
    SELECT NOT EXISTS (SELECT 1 FROM evaluation_result WHERE idempotency_key = $8) AS new
), gate AS (
    SELECT $13::bool AND new AS go FROM fresh
), "#,
    rate_limit::slot_cte!(),
    r#", call AS (
    INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, model_version,
                               prompt_version, cost_usd, started_at, lane, workload, tier)
    SELECT $7, $8, $9, $10, $1, $11, $12, $14::float8::numeric, coalesce((SELECT starts FROM slot), now()),
           job.lane, job.workload, $15
    FROM fresh, (SELECT lane, workload FROM evaluation_outbox WHERE id = $7) job WHERE new AND (NOT $13 OR EXISTS (SELECT 1 FROM slot))
    RETURNING id, started_at
), released AS (
    -- The budget's reservation ends where the ledger row carries the estimate.
    UPDATE evaluation_outbox SET reserved_usd = NULL
    WHERE id = $7 AND reserved_usd IS NOT NULL AND EXISTS (SELECT 1 FROM call)
)
SELECT (SELECT new FROM fresh), (SELECT id FROM call), "#,
    rate_limit::slot_wait!(),
    ", (SELECT started_at FROM call)"
);

/// Records the call about to be made, costed at `estimate_usd` (its worst case) until its
/// usage is known, in a slot of the shared rate limit when `slot` says one applies, unless a
/// result for the job's key exists (article step 4, the line that saves money). One statement
/// and one round trip for all three: a dedup hit takes no slot.
pub async fn start_call(
    client: &impl GenericClient,
    job: &ClaimedJob,
    caller: (&str, &str),
    estimate_usd: f64,
    slot: Option<Slot<'_>>,
    tier: Tier,
) -> Result<Start> {
    let row = run_start(client, job, caller, estimate_usd, slot, tier).await?;
    if !row.get::<_, bool>(0) {
        return Ok(Start::Evaluated);
    }
    // Without a slot asked for, the wait reads NULL: the call starts now.
    let (wait, opens_in) = match rate_limit::answered(row.get(2), row.get(3)) {
        Take::Reserved { wait } => (wait, Duration::ZERO),
        Take::Full { opens_in } => (Duration::ZERO, opens_in),
    };
    Ok(match started(&row) {
        Some(call) => Start::Call { call, wait },
        None => Start::Full { opens_in },
    })
}

/// A call outside the shared rate limit (a batch line): the dedup check and the ledger row of
/// [`start_call`], without a slot, so it is never refused one: `None` when a result for the
/// job's key exists.
pub async fn start_without_slot(
    client: &impl GenericClient,
    job: &ClaimedJob,
    caller: (&str, &str),
    estimate_usd: f64,
    tier: Tier,
) -> Result<Option<CallId>> {
    let row = run_start(client, job, caller, estimate_usd, None, tier).await?;
    Ok(started(&row))
}

/// The ledger row [`START`] wrote, if it wrote one.
fn started(row: &tokio_postgres::Row) -> Option<CallId> {
    row.get::<_, Option<i64>>(1).map(|id| CallId {
        id,
        started_at: row.get(4),
    })
}

/// Runs [`START`]: the key's freshness, the row's id, the slot's wait and when the limit
/// opens (NULL without a slot), the row's start.
async fn run_start(
    client: &impl GenericClient,
    job: &ClaimedJob,
    (worker, provider): (&str, &str),
    estimate_usd: f64,
    slot: Option<Slot<'_>>,
    tier: Tier,
) -> Result<tokio_postgres::Row> {
    let statement = client.prepare_cached(START).await?;
    let [a, b, c, d, e] = slot.map_or([0.0; 5], |slot| {
        rate_limit::slot_params(slot.pace, slot.tokens, slot.max_wait)
    });
    Ok(client
        .query_one(
            &statement,
            &[
                &provider,
                &a,
                &b,
                &c,
                &d,
                &e,
                &job.id.0,
                &job.key.as_str(),
                &job.attempts,
                &worker,
                &job.versions.model_version,
                &job.versions.prompt_version,
                &slot.is_some(),
                &estimate_usd,
                &tier.name(),
            ],
        )
        .await?)
}

/// A started call that waited (for its slot in the rate limit, or for one of the invocation's
/// calls to end) withdrawn before it is made: always (`$5`: the invocation ran out of time or
/// was stopped meanwhile), or if a hold began meanwhile (another worker's 429: calling now
/// would earn its own). Its ledger row goes (it never was a call; the delete takes its estimate
/// out of the running totals) and its tokens (`$4`, seconds of the token budget) go back to
/// the shared budget. Reads whether it went, and the hold's seconds left (NULL for none).
const WITHDRAW: &str = r#"
WITH held AS (
    SELECT held_until FROM provider_rate_limit WHERE provider = $1 AND held_until > now()
), withdrawn AS (
    DELETE FROM provider_call
    WHERE id = $2 AND started_at = $3 AND finished_at IS NULL
      AND ($5 OR EXISTS (SELECT 1 FROM held))
    RETURNING provider
), given_back AS (
    UPDATE provider_rate_limit r
    SET token_tat = r.token_tat - make_interval(secs => $4::float8), updated_at = now()
    FROM withdrawn WHERE r.provider = withdrawn.provider AND $4::float8 <> 0
)
SELECT EXISTS (SELECT 1 FROM withdrawn), extract(epoch FROM (SELECT held_until FROM held) - now())::float8
"#;

/// What became of a started call asked to be withdrawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Withdrawal {
    /// Still to be made: nothing held it and it was not withdrawn regardless.
    Kept,
    /// No ledger row and its tokens given back; `hold` is the fleet's hold left, if one runs.
    Withdrawn { hold: Option<Duration> },
}

/// Withdraws `call` if the fleet's hold began since it started, or `regardless` of one.
pub async fn withdraw(
    client: &impl GenericClient,
    call: CallId,
    provider: &str,
    token_cost_secs: f64,
    regardless: bool,
) -> Result<Withdrawal> {
    let statement = client.prepare_cached(WITHDRAW).await?;
    let row = client
        .query_one(
            &statement,
            &[
                &provider,
                &call.id,
                &call.started_at,
                &token_cost_secs,
                &regardless,
            ],
        )
        .await?;
    if !row.get::<_, bool>(0) {
        return Ok(Withdrawal::Kept);
    }
    let hold = row
        .get::<_, Option<f64>>(1)
        .map(|secs| Duration::from_secs_f64(secs.max(0.0)));
    Ok(Withdrawal::Withdrawn { hold })
}

/// Completes the call's row, and moves the shared token budget by `token_correction_secs`
/// (the usage against the estimate; `rate_limit::Settlement`) in the same statement, only
/// the first time: a write repeated after a blink changes neither the row, the running totals
/// nor the token budget again.
const FINISH: &str = r#"
WITH finished AS (
    UPDATE provider_call
    SET finished_at = now(), outcome = $2, error_class = $3, http_status = $4, billed = $5,
        input_tokens = $6, output_tokens = $7, cost_usd = coalesce($8::float8::numeric, cost_usd),
        latency_ms = $9, cached_input_tokens = $11, cache_write_tokens = $12
    WHERE id = $1 AND started_at = $13 AND finished_at IS NULL
    RETURNING provider
)
UPDATE provider_rate_limit r
SET token_tat = r.token_tat + make_interval(secs => $10::float8), updated_at = now()
FROM finished
WHERE r.provider = finished.provider AND $10::float8 <> 0
"#;

pub async fn finish_call(
    client: &impl GenericClient,
    call: CallId,
    record: &CallRecord,
    token_correction_secs: f64,
) -> Result<()> {
    let statement = client.prepare_cached(FINISH).await?;
    client
        .execute(
            &statement,
            &[
                &call.id,
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
                &token_correction_secs,
                &record.usage.cached_input_tokens,
                &record.usage.cache_write_tokens,
                &call.started_at,
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

/// How many days ahead the sweeper creates the ledger's daily partitions: a sweeper down that
/// long still loses nothing (the DEFAULT partition catches the rest).
pub const PARTITIONS_AHEAD_DAYS: i32 = 3;

/// The ledger's partitions (migration V14): today's and the next days' created ahead, and, with
/// `keep`, the days older than it dropped whole (the running totals keep their money; results,
/// and so dedup, are another table). Returns the partitions dropped.
pub async fn maintain_partitions(
    client: &impl GenericClient,
    ahead_days: i32,
    keep: Option<Duration>,
) -> Result<i32> {
    let row = client
        .query_one(
            "SELECT provider_call_partitions($1, make_interval(secs => $2::float8))",
            &[&ahead_days, &keep.map(|keep| keep.as_secs_f64())],
        )
        .await?;
    Ok(row.get(0))
}

/// A billed answer held to `policy`'s contract, and its ledger record at `prices` (counted in
/// the metrics once, however often its writes are tried).
pub fn billed_answer(
    job: &ClaimedJob,
    reply: &ProviderReply,
    (latency, tier): (Duration, Tier),
    policy: &Policy,
    prices: &PriceTable,
) -> (
    CallRecord,
    std::result::Result<Evaluation, ContractViolation>,
) {
    let checked = contract::validate(&reply.output, policy);
    let cost_usd = prices.cost(job.versions.model_version.model(), reply.usage, tier);
    let record = CallRecord {
        outcome: match &checked {
            Ok(_) => CallOutcome::Ok,
            Err(violation) => CallOutcome::Failed(violation.kind),
        },
        http_status: Some(reply.http_status),
        billed: Some(true),
        usage: reply.usage,
        cost_usd: Some(cost_usd),
        latency,
    };
    let tokens = (reply.usage.input_tokens, reply.usage.output_tokens);
    metric::provider_call(latency, tokens, cost_usd);
    (record, checked)
}
