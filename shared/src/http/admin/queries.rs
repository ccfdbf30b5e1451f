//! The console's own reads: what no report, CLI command or API route already returns. Each is
//! one statement; none returns ticket text (the ticket page gets that from `ticket::find`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use uuid::Uuid;

use crate::{
    db,
    domain::{error::Result, ticket::TicketId},
};

/// One hour of the last 24.
#[derive(Debug, Clone, PartialEq)]
pub struct Hour {
    pub start: DateTime<Utc>,
    /// Evaluations: calls answered within the contract (the ledger's totals keep them through
    /// erasure and retention).
    pub evaluations: i64,
    pub calls: i64,
    pub failed_calls: i64,
    pub cost_usd: f64,
}

/// Calls from the ledger's running totals (production work only), evaluations as the calls
/// answered within the contract: nothing here grows with the day's traffic.
const HOURLY: &str = r#"
WITH hours AS (
    SELECT generate_series(date_trunc('hour', now(), 'UTC') - interval '23 hours',
                           date_trunc('hour', now(), 'UTC'), interval '1 hour') AS start
), calls AS (
    SELECT hour AS start, sum(ok)::int8 AS ok, sum(calls)::int8 AS n, sum(failed)::int8 AS failed,
           sum(cost_usd)::float8 AS cost
    FROM provider_call_hour
    WHERE hour >= date_trunc('hour', now(), 'UTC') - interval '23 hours'
      AND workload = 'production'
    GROUP BY 1
)
SELECT h.start, coalesce(c.ok, 0), coalesce(c.n, 0), coalesce(c.failed, 0), coalesce(c.cost, 0)
FROM hours h
LEFT JOIN calls c ON c.start = h.start
ORDER BY h.start
"#;

pub async fn last_24_hours(pool: &Pool) -> Result<Vec<Hour>> {
    let client = db::client(pool).await?;
    Ok(client
        .query(HOURLY, &[])
        .await?
        .into_iter()
        .map(|row| Hour {
            start: row.get(0),
            evaluations: row.get(1),
            calls: row.get(2),
            failed_calls: row.get(3),
            cost_usd: row.get(4),
        })
        .collect())
}

/// A recent dead letter: ids, key and error only.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadExample {
    pub reason: String,
    pub outbox_id: i64,
    pub ticket_id: TicketId,
    pub idempotency_key: String,
    pub attempts: i32,
    pub died_at: DateTime<Utc>,
    pub last_error: Option<String>,
}

/// Errors are cut short: they come from providers and name the failure, but a long one could
/// quote a model's output.
const DEAD_EXAMPLES: &str = r#"
SELECT reason, id, ticket_id, idempotency_key, attempts, finished_at, last_error
FROM (
    SELECT coalesce(error_class, 'unknown') AS reason, id, ticket_id, idempotency_key, attempts,
           finished_at, left(last_error, 160) AS last_error,
           row_number() OVER (PARTITION BY coalesce(error_class, 'unknown')
                              ORDER BY finished_at DESC, id DESC) AS n
    FROM evaluation_outbox
    WHERE status = 'dead' AND finished_at > now() - make_interval(secs => $1)
      AND workload = 'production'
) newest
WHERE n <= $2
ORDER BY reason, finished_at DESC, id DESC
"#;

/// The newest `per_reason` dead letters of each reason within `since`.
pub async fn dead_examples(
    pool: &Pool,
    since: Duration,
    per_reason: i64,
) -> Result<Vec<DeadExample>> {
    let client = db::client(pool).await?;
    Ok(client
        .query(DEAD_EXAMPLES, &[&since.as_secs_f64(), &per_reason])
        .await?
        .into_iter()
        .map(|row| DeadExample {
            reason: row.get(0),
            outbox_id: row.get(1),
            ticket_id: TicketId(row.get(2)),
            idempotency_key: row.get(3),
            attempts: row.get(4),
            died_at: row.get(5),
            last_error: row.get(6),
        })
        .collect())
}

/// A prompt/model pair tickets are evaluated under.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionInUse {
    pub prompt_version: String,
    pub model_version: String,
    pub tickets: i64,
    pub results: i64,
    pub promoted: bool,
}

const VERSIONS: &str = r#"
WITH promoted AS (
    SELECT prompt_version, model_version FROM version_promotion ORDER BY id DESC LIMIT 1
)
SELECT te.prompt_version, te.model_version, count(*), count(r.idempotency_key),
       coalesce(bool_or(p.prompt_version IS NOT NULL), false)
FROM ticket_evaluation te
JOIN ticket t ON t.id = te.ticket_id AND t.workload = 'production'
LEFT JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
LEFT JOIN promoted p ON p.prompt_version = te.prompt_version AND p.model_version = te.model_version
GROUP BY 1, 2
ORDER BY 1, 2
"#;

pub async fn versions_in_use(pool: &Pool) -> Result<Vec<VersionInUse>> {
    let client = db::client(pool).await?;
    Ok(client
        .query(VERSIONS, &[])
        .await?
        .into_iter()
        .map(|row| VersionInUse {
            prompt_version: row.get(0),
            model_version: row.get(1),
            tickets: row.get(2),
            results: row.get(3),
            promoted: row.get(4),
        })
        .collect())
}

/// One job of a ticket and the calls made for it (the attempt ledger).
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub idempotency_key: String,
    pub prompt_version: String,
    pub model_version: String,
    /// `None` once retention removed the finished row.
    pub status: Option<String>,
    pub attempts: Option<i32>,
    pub error_class: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub idempotency_key: String,
    pub attempt: i32,
    pub provider: String,
    pub started_at: DateTime<Utc>,
    pub outcome: String,
    pub http_status: Option<i32>,
    pub billed: Option<bool>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub latency_ms: Option<i32>,
}

const JOBS: &str = r#"
SELECT te.idempotency_key, te.prompt_version, te.model_version, o.status, o.attempts, o.error_class
FROM ticket_evaluation te
LEFT JOIN evaluation_outbox o ON o.idempotency_key = te.idempotency_key
WHERE te.ticket_id = $1
ORDER BY te.created_at, te.idempotency_key
"#;

/// Calls are per content key, so a duplicate ticket shows the calls its content cost.
const CALLS: &str = r#"
SELECT c.idempotency_key, c.attempt, c.provider, c.started_at, c.outcome, c.http_status,
       c.billed, c.input_tokens, c.output_tokens, c.cost_usd::float8, c.latency_ms
FROM provider_call c
WHERE c.idempotency_key IN (SELECT idempotency_key FROM ticket_evaluation WHERE ticket_id = $1)
ORDER BY c.started_at, c.id
"#;

pub async fn ledger(pool: &Pool, ticket: TicketId) -> Result<(Vec<Job>, Vec<Call>)> {
    let client = db::client(pool).await?;
    let id: Uuid = ticket.0;
    let jobs = client
        .query(JOBS, &[&id])
        .await?
        .into_iter()
        .map(|row| Job {
            idempotency_key: row.get(0),
            prompt_version: row.get(1),
            model_version: row.get(2),
            status: row.get(3),
            attempts: row.get(4),
            error_class: row.get(5),
        })
        .collect();
    let calls = client
        .query(CALLS, &[&id])
        .await?
        .into_iter()
        .map(|row| Call {
            idempotency_key: row.get(0),
            attempt: row.get(1),
            provider: row.get(2),
            started_at: row.get(3),
            outcome: row.get(4),
            http_status: row.get(5),
            billed: row.get(6),
            input_tokens: row.get(7),
            output_tokens: row.get(8),
            cost_usd: row.get(9),
            latency_ms: row.get(10),
        })
        .collect();
    Ok((jobs, calls))
}

/// The shared rate limit (`pipeline::limits::rate_limit`), as on-call reads it: how far ahead each
/// budget is spent (more than about a second: calls wait) and how long a 429 still holds
/// every worker off.
const RATE_LIMIT: &str = r#"
SELECT provider,
       extract(epoch FROM greatest(request_tat, now()) - now())::float8,
       extract(epoch FROM greatest(token_tat, now()) - now())::float8,
       -- `held_until` is -infinity until a 429 comes: compared before it is subtracted.
       extract(epoch FROM greatest(held_until, now()) - now())::float8
FROM provider_rate_limit ORDER BY provider
"#;

pub struct RateLimit {
    pub provider: String,
    pub requests_ahead_seconds: f64,
    pub tokens_ahead_seconds: f64,
    pub held_for_seconds: f64,
}

pub async fn rate_limit_state(pool: &Pool) -> Result<Vec<RateLimit>> {
    let client = db::client(pool).await?;
    let rows = client.query(RATE_LIMIT, &[]).await?;
    Ok(rows
        .into_iter()
        .map(|row| RateLimit {
            provider: row.get(0),
            requests_ahead_seconds: row.get(1),
            tokens_ahead_seconds: row.get(2),
            held_for_seconds: row.get(3),
        })
        .collect())
}
