//! The daily spend budget (`TRIAGE_DAILY_BUDGET_USD`, OWASP LLM10): what the ledger's running
//! totals say was spent since 00:00 UTC, plus what every claimed job may still cost, decides
//! which jobs a worker may claim. When nothing is left, workers stop claiming: jobs stay
//! pending with no attempt spent, and the next UTC day they go on.
//!
//! Each job is held at its own worst case (its input tokens and the output cap, at its model's
//! price; the outbox's `reserved_usd`) from its claim until its ledger row carries the same
//! estimate as its cost, corrected once the usage is known (a timeout keeps the estimate). The
//! spend is one read of today's rows of `provider_call_hour` (migration V9), never a scan of
//! the day's calls, and survives erasure and retention. The decision (the fleet's lock, the
//! read, which jobs fit, their reservations) is one statement, `budget_keep` (migration V15),
//! whose lock ends with its commit: no network turnaround is ever made under it, so two
//! workers never both claim the same headroom and the fleet overshoots by at most the one call
//! that crossed the line. Far from the line a decision also grants the worker room for more
//! claims like the one it kept ([`Grant`], V19), which it claims without deciding again: one
//! decision per [`CLAIMS_PER_GRANT`] claims instead of one per claim. docs/ledger.md has the
//! design.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use deadpool_postgres::{GenericClient, Pool};

use crate::{
    db,
    domain::{error::Result, rows::OutboxId, versions::ModelVersion},
    providers::PriceTable,
    telemetry::metric,
};

/// What the ledger and the queue say about today's money.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    /// Cost of the calls started since 00:00 UTC, the ones of unknown outcome at their
    /// reserved estimate.
    pub spent_today_usd: f64,
    /// What the jobs kept under a live lease, whose call has no ledger row yet, may cost.
    pub reserved_usd: f64,
}

/// Why a job for `model` must not be created under `budget_usd`: a model without a price
/// would be spent without being counted. Asked at worker start, reprocess and promote.
pub fn unpriced(
    budget_usd: Option<f64>,
    prices: &PriceTable,
    model: &ModelVersion,
) -> Option<String> {
    (budget_usd.is_some() && !model.is_rules() && !prices.knows(model.model())).then(|| {
        format!(
            "a daily budget is set but {:?} has no price in TRIAGE_PRICES: its calls could not be counted",
            model.model()
        )
    })
}

/// Today's spend and the reservations (migration V15's `budget_spend`, which the decision
/// reads too).
const SPEND: &str = "SELECT spent_usd, reserved_usd FROM budget_spend()";

/// Today's spend and the reservations, in one statement.
pub async fn spend(client: &impl GenericClient) -> Result<Spend> {
    let statement = client.prepare_cached(SPEND).await?;
    let row = client.query_one(&statement, &[]).await?;
    Ok(Spend {
        spent_today_usd: row.get(0),
        reserved_usd: row.get(1),
    })
}

/// The decision, under the fleet's lock, in the server: how many of the jobs (in claim order,
/// at their estimates) fit, with theirs reserved, and the grant made to the asking worker.
const KEEP: &str =
    "SELECT spent_usd, reserved_usd, kept, granted FROM budget_keep($1, $2, $3, $4, $5, $6, $7)";

/// How many claims like the one a decision kept whole its grant may cover (at most half of
/// what is left after it): far from the line, one decision per this many claims.
pub const CLAIMS_PER_GRANT: f64 = 32.0;

/// What the budget decided about the jobs of a claim, in claim order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// How many of them (the first ones) it keeps, with theirs reserved.
    pub jobs: usize,
    /// The day's spend reached the budget.
    pub exhausted: bool,
}

/// One invocation's grant (V19's `budget_grant`): room the fleet's decision set aside for this
/// worker, which it claims under without deciding, each job at its own estimate, until a
/// claim does not fit. The jobs claimed under it stay covered until their ledger rows carry
/// their estimates ([`Grant::started`]); the next decision is told what they come to, so the
/// grant's row never holds less than they may cost. Released at the invocation's end.
#[derive(Debug, Default)]
pub struct Grant(Mutex<Granted>);

#[derive(Debug, Default)]
struct Granted {
    /// What may still be claimed without a decision.
    left: f64,
    /// The jobs claimed under the grant that have not started, at their estimates.
    covered: HashMap<OutboxId, f64>,
    /// Whether the last decision left this worker a row.
    row: bool,
}

impl Grant {
    fn lock(&self) -> std::sync::MutexGuard<'_, Granted> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes `estimates` (of `jobs`) from what is left, if it covers them all.
    fn cover(&self, jobs: &[OutboxId], estimates: &[f64]) -> bool {
        let mut granted = self.lock();
        let usd: f64 = estimates.iter().sum();
        if usd > granted.left {
            return false;
        }
        granted.left -= usd;
        let covered = jobs.iter().copied().zip(estimates.iter().copied());
        granted.covered.extend(covered);
        true
    }

    /// What the jobs claimed under the grant and not started may still cost.
    fn outstanding(&self) -> f64 {
        self.lock().covered.values().sum()
    }

    /// A decision's grant: what may be claimed from now on without another. Its row holds
    /// that and `outstanding_usd` (none when both are nothing).
    fn renew(&self, granted_usd: f64, outstanding_usd: f64) {
        let mut granted = self.lock();
        granted.left = granted_usd;
        granted.row = granted_usd + outstanding_usd > 0.0;
    }

    /// `job`'s ledger row carries its estimate, or it went back without one: the grant no
    /// longer covers it.
    pub fn started(&self, job: OutboxId) {
        self.lock().covered.remove(&job);
    }

    /// Ends the grant: its room goes back to the fleet (what this invocation claimed under it
    /// has started or gone back by now). No round trip when the last decision left no row; a
    /// worker that dies, or finds the database away here, leaves the row to its `until`.
    pub async fn release(&self, pool: &Pool, worker: &str) -> Result<()> {
        if !std::mem::take(&mut self.lock().row) {
            return Ok(());
        }
        let client = db::client(pool).await?;
        let statement = client
            .prepare_cached("DELETE FROM budget_grant WHERE worker = $1")
            .await?;
        client.execute(&statement, &[&worker]).await?;
        Ok(())
    }
}

/// The decision on a worker's claim of `jobs` at `estimates` under `budget_usd`: all of them
/// when `grant` covers them, else the fleet's decision, which renews the grant. The claim and
/// the giving back of what is not kept are the outbox's (`outbox::budgeted`).
pub async fn afford_claim(
    client: &impl GenericClient,
    budget_usd: f64,
    (worker, lease): (&str, Duration),
    jobs: &[OutboxId],
    estimates: &[f64],
    grant: &Grant,
) -> Result<Kept> {
    if grant.cover(jobs, estimates) {
        return Ok(Kept {
            jobs: jobs.len(),
            exhausted: false,
        });
    }
    let outstanding_usd = grant.outstanding();
    let ask = Ask {
        worker,
        outstanding_usd,
        usd: CLAIMS_PER_GRANT * estimates.iter().sum::<f64>(),
        lease,
    };
    let (kept, granted_usd) = decide(client, budget_usd, jobs, estimates, Some(ask)).await?;
    grant.renew(granted_usd, outstanding_usd);
    Ok(kept)
}

/// The decision on `jobs` at `estimates` without a grant: provider batches (whose lines stay
/// `processing` until their results are costed).
pub async fn afford(
    client: &impl GenericClient,
    budget_usd: f64,
    jobs: &[OutboxId],
    estimates: &[f64],
) -> Result<Kept> {
    Ok(decide(client, budget_usd, jobs, estimates, None).await?.0)
}

/// A worker's request for a grant with its decision.
struct Ask<'a> {
    worker: &'a str,
    /// What it claimed under its grant and has not started.
    outstanding_usd: f64,
    /// The room it asks for.
    usd: f64,
    /// How long the grant's row lasts: its jobs' lease, which outlasts the invocation.
    lease: Duration,
}

/// The decision (`budget_keep`) on `jobs` at `estimates`, and the room it granted.
async fn decide(
    client: &impl GenericClient,
    budget_usd: f64,
    jobs: &[OutboxId],
    estimates: &[f64],
    ask: Option<Ask<'_>>,
) -> Result<(Kept, f64)> {
    let ids: Vec<i64> = jobs.iter().map(|job| job.0).collect();
    let keep = client.prepare_cached(KEEP).await?;
    let (worker, outstanding, asked, lease) = ask.map_or((None, 0.0, 0.0, 0.0), |ask| {
        let lease = ask.lease.as_secs_f64();
        (Some(ask.worker), ask.outstanding_usd, ask.usd, lease)
    });
    let row = client
        .query_one(
            &keep,
            &[
                &ids,
                &estimates,
                &budget_usd,
                &worker,
                &outstanding,
                &asked,
                &lease,
            ],
        )
        .await?;
    let (spent_usd, kept, granted_usd): (f64, i32, f64) = (row.get(0), row.get(2), row.get(3));
    metric::spent_today(spent_usd);
    let kept = Kept {
        jobs: kept as usize,
        exhausted: spent_usd >= budget_usd,
    };
    if kept.jobs == 0 && kept.exhausted {
        tracing::warn!(budget_usd, spent_usd, "daily budget spent: not claiming");
        metric::budget_exhausted();
    }
    Ok((kept, granted_usd))
}
