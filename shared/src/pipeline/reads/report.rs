//! What the on-call person reads: queue health (the age of the oldest *claimable* item is the
//! headline) and the dead-letter report grouped by reason (article, "O que observar").
//! Production work only: `triage eval`'s jobs and calls (`workload = 'eval'`) are reported by
//! `triage eval`, never here (the spend *budget* still counts them: `budget::spend`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;

use crate::{
    db,
    domain::error::Result,
    pipeline::{feedback, limits::budget, outbox::claim::Serves, pause},
    telemetry::metric,
};

/// The fewest tickets with feedback in 7 days for which agreement is reported as a metric.
pub const MIN_AGREEMENT_TICKETS: i64 = 30;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Health {
    pub pending: i64,
    /// Pending but waiting out a backoff or a reprocess spread: not a backlog.
    pub delayed: i64,
    pub processing: i64,
    /// Processing with a lease still running.
    pub live_leases: i64,
    pub done: i64,
    pub dead: i64,
    /// Age of the oldest item that could be claimed now by a worker of this configuration;
    /// delayed retries don't count, so they raise no false alarm, and neither do unserved jobs.
    pub oldest_pending_age_seconds: f64,
    /// Pending jobs that no worker of this configuration claims: `rules@…` jobs left by a
    /// smoke test with `Provider=rules` once a real provider is deployed (or model jobs while
    /// `rules` is). They would otherwise age the headline alarm forever (docs/runbook.md).
    pub unserved_pending: i64,
    /// Jobs closed without a call because the result existed (retained rows only).
    pub dedup_hits: i64,
    /// Tickets whose content (under their versions) had been seen before: each one a call not
    /// made.
    pub duplicate_tickets: i64,
    pub billed_calls: i64,
    /// Calls whose outcome is unknown (in flight, crashed, or timed out): possibly billed.
    pub possibly_billed_calls: i64,
    pub cost_usd: f64,
    /// Calls not made thanks to the key, at the average cost of a successful call: one per
    /// duplicate ticket, whether its job was never created (ingest) or found the result when
    /// claimed (a dedup hit, after retention), so no dedup hit is counted twice.
    pub saved_usd: f64,
    /// `TRIAGE_DAILY_BUDGET_USD`; `null` when unset.
    pub daily_budget_usd: Option<f64>,
    /// What the ledger says was spent since 00:00 UTC (the budget's measure).
    pub spent_today_usd: f64,
    /// Every production call's cost (retries, failures and reprocessing included) over the
    /// evaluations they produced; `null` before the first.
    pub cost_per_ticket_usd: Option<f64>,
    /// The last 24 hours' production spend, times 30.
    pub month_projection_usd: f64,
    /// Cost per evaluated ticket by prompt version, lane and tier.
    pub cost_per_task: Vec<TaskCost>,
    pub breakers: Vec<BreakerState>,
    /// The lanes an operator paused (`interactive`, `bulk`, `deliveries`).
    pub paused: Vec<&'static str>,
    /// Agreement with the help desk's feedback per version, over 7 and 30 days.
    pub agreement: Vec<feedback::Agreement>,
}

/// What evaluating a ticket costs in one group of production calls.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskCost {
    pub prompt_version: String,
    pub lane: String,
    pub tier: String,
    pub calls: i64,
    /// Calls that produced an evaluation.
    pub evaluated: i64,
    pub cost_usd: f64,
    pub cost_per_ticket_usd: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BreakerState {
    pub provider: String,
    pub state: String,
    pub consecutive_failures: i32,
    pub open_until: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeadLetterGroup {
    pub reason: String,
    pub count: i64,
    pub newest: DateTime<Utc>,
}

/// Each count on the partial index of its status (claim, leases, dead), the finished jobs
/// and dedup hits from `report_count` (kept by triggers, migration V9): proportional to the
/// live queue, never a scan of the outbox.
const QUEUE: &str = r#"
SELECT (SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND workload = 'production'),
       (SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND available_at > now() AND workload = 'production'),
       (SELECT count(*) FROM evaluation_outbox WHERE status = 'processing' AND workload = 'production'),
       (SELECT count(*) FROM evaluation_outbox WHERE status = 'processing' AND locked_until >= now()
                                             AND workload = 'production'),
       (SELECT coalesce(sum(n), 0)::int8 FROM report_count WHERE what = 'done'),
       (SELECT count(*) FROM evaluation_outbox WHERE status = 'dead' AND workload = 'production'),
       (SELECT coalesce(sum(n), 0)::int8 FROM report_count WHERE what = 'dedup'),
       (SELECT count(*) FROM evaluation_outbox
        WHERE status = 'pending' AND workload = 'production' AND (model_version LIKE 'rules@%') <> $1)
"#;

/// Served by the partial claim index; the same model filter as the claim (`outbox::claim`),
/// and like it blind to paused lanes: a pause is reported as one, not as a stuck queue.
const OLDEST_CLAIMABLE: &str = r#"
SELECT coalesce(extract(epoch FROM now() - min(available_at)), 0)::float8
FROM evaluation_outbox
WHERE status = 'pending' AND available_at <= now() AND (model_version LIKE 'rules@%') = $1
  AND workload = 'production' AND lane NOT IN (SELECT lane FROM pause)
"#;

/// The ledger's running totals (`provider_call_hour`, one row per hour, provider and
/// workload), never its rows; production work only (eval runs are not production's).
const LEDGER: &str = r#"
SELECT coalesce(sum(billed), 0)::int8,
       coalesce(sum(billing_unknown), 0)::int8,
       coalesce(sum(cost_usd), 0)::float8,
       coalesce(sum(ok_billed_cost_usd) / nullif(sum(ok_billed), 0), 0)::float8
FROM provider_call_hour
WHERE workload = 'production'
"#;

/// Ticket links beyond the first of each content key, from `report_count`.
const DUPLICATE_TICKETS: &str = r#"
SELECT (coalesce(sum(n) FILTER (WHERE what = 'links'), 0)
        - coalesce(sum(n) FILTER (WHERE what = 'keys'), 0))::int8
FROM report_count WHERE what IN ('links', 'keys')
"#;
/// From the ledger's running totals, keyed by prompt version, lane and tier too (V13):
/// production calls only, eval work is apart (V7's `workload`).
const COST_PER_TASK: &str = r#"
SELECT prompt_version, lane, tier, sum(calls)::int8, sum(ok)::int8, sum(cost_usd)::float8
FROM provider_call_hour
WHERE workload = 'production'
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
"#;

/// The last 24 whole hours and the current one, from the running totals.
const LAST_DAY_SPEND: &str = r#"
SELECT coalesce(sum(cost_usd), 0)::float8 FROM provider_call_hour
WHERE workload = 'production' AND hour > date_trunc('hour', now(), 'UTC') - interval '1 day'
"#;

/// Cost per evaluated ticket by prompt version, lane and tier, and the month's projection at
/// the last 24 hours' rate.
pub async fn cost_per_task(client: &impl GenericClient) -> Result<(Vec<TaskCost>, f64)> {
    let groups = client
        .query(COST_PER_TASK, &[])
        .await?
        .into_iter()
        .map(|row| {
            let (evaluated, cost_usd): (i64, f64) = (row.get(4), row.get(5));
            TaskCost {
                prompt_version: row.get(0),
                lane: row.get(1),
                tier: row.get(2),
                calls: row.get(3),
                evaluated,
                cost_usd,
                cost_per_ticket_usd: per_ticket(cost_usd, evaluated),
            }
        })
        .collect();
    let last_day: f64 = client.query_one(LAST_DAY_SPEND, &[]).await?.get(0);
    Ok((groups, last_day * 30.0))
}

fn per_ticket(cost_usd: f64, evaluated: i64) -> Option<f64> {
    (evaluated > 0).then(|| cost_usd / evaluated as f64)
}

const BREAKERS: &str = "SELECT provider, state, consecutive_failures, open_until FROM provider_breaker ORDER BY provider";

const DEAD_LETTERS: &str = r#"
SELECT coalesce(error_class, 'unknown'), count(*), max(finished_at)
FROM evaluation_outbox
WHERE status = 'dead' AND finished_at > now() - make_interval(secs => $1) AND workload = 'production'
GROUP BY 1
ORDER BY 2 DESC, 1
"#;

/// The queue as the workers that `serves` describes see it (the deployed configuration's:
/// `Serves::for_model_version(&config.versions.model)`), and today's spend against
/// `daily_budget_usd`.
pub async fn health(pool: &Pool, serves: Serves, daily_budget_usd: Option<f64>) -> Result<Health> {
    let rules = serves == Serves::RulesOnly;
    let client = db::client(pool).await?;
    let spend = budget::spend(&client).await?;
    let queue = client.query_one(QUEUE, &[&rules]).await?;
    let oldest: f64 = client.query_one(OLDEST_CLAIMABLE, &[&rules]).await?.get(0);
    let ledger = client.query_one(LEDGER, &[]).await?;
    let duplicate_tickets: i64 = client.query_one(DUPLICATE_TICKETS, &[]).await?.get(0);
    let (cost_per_task, month_projection_usd) = cost_per_task(&client).await?;
    let (cost, evaluated) = cost_per_task
        .iter()
        .fold((0.0, 0), |(c, e), g| (c + g.cost_usd, e + g.evaluated));
    let breakers = client
        .query(BREAKERS, &[])
        .await?
        .into_iter()
        .map(|row| BreakerState {
            provider: row.get(0),
            state: row.get(1),
            consecutive_failures: row.get(2),
            open_until: row.get(3),
        })
        .collect();
    let average_cost: f64 = ledger.get(3);
    let paused = pause::paused(&client).await?.names();
    let agreement = feedback::agreement(&client).await?;
    Ok(Health {
        pending: queue.get(0),
        delayed: queue.get(1),
        processing: queue.get(2),
        live_leases: queue.get(3),
        done: queue.get(4),
        dead: queue.get(5),
        oldest_pending_age_seconds: oldest,
        unserved_pending: queue.get(7),
        dedup_hits: queue.get(6),
        duplicate_tickets,
        billed_calls: ledger.get(0),
        possibly_billed_calls: ledger.get(1),
        cost_usd: ledger.get(2),
        saved_usd: duplicate_tickets as f64 * average_cost,
        daily_budget_usd,
        spent_today_usd: spend.spent_today_usd,
        cost_per_ticket_usd: per_ticket(cost, evaluated),
        month_projection_usd,
        cost_per_task,
        breakers,
        paused,
        agreement,
    })
}

impl Health {
    /// The gauges behind the dashboard and the age and breaker alarms.
    pub fn emit(&self) {
        metric::oldest_claimable_age(self.oldest_pending_age_seconds);
        for (status, depth) in [
            ("pending", self.pending),
            ("processing", self.processing),
            ("done", self.done),
            ("dead", self.dead),
            ("unserved", self.unserved_pending),
        ] {
            metric::queue_depth(status, depth);
        }
        metric::breaker_open(self.breakers.iter().any(|b| b.state != "closed"));
        metric::spent_today(self.spent_today_usd);
        metric::paused_lanes(self.paused.len());
        // The version the desk labelled most this week: the one readers are shown. Below a
        // few dozen tickets the share is noise, and no figure is better than a wrong alarm.
        let week = self.agreement.iter().filter(|a| a.window_days == 7);
        if let Some(top) = week.max_by_key(|a| a.n) {
            if top.n >= MIN_AGREEMENT_TICKETS {
                metric::department_agreement(top.department_accuracy);
            }
        }
        if let Some(usd) = self.cost_per_ticket_usd {
            metric::cost_per_ticket(usd);
        }
    }
}

pub async fn dead_letters(pool: &Pool, since: Duration) -> Result<Vec<DeadLetterGroup>> {
    let client = db::client(pool).await?;
    Ok(client
        .query(DEAD_LETTERS, &[&since.as_secs_f64()])
        .await?
        .into_iter()
        .map(|row| DeadLetterGroup {
            reason: row.get(0),
            count: row.get(1),
            newest: row.get(2),
        })
        .collect())
}
