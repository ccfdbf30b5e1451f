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
//! that crossed the line. docs/ledger.md has the design.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use crate::{
    db,
    domain::{error::Result, versions::ModelVersion},
    evaluate::PriceTable,
    pipeline::outbox::{
        claim::{self, Serves},
        ClaimedJob, Lanes,
    },
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
/// at their estimates) fit, with theirs reserved.
const KEEP: &str = "SELECT spent_usd, reserved_usd, kept FROM budget_keep($1, $2, $3)";

/// What a claim under the budget took.
#[derive(Debug)]
pub enum Budgeted {
    /// `jobs`; `cut` when the budget kept fewer than were claimable.
    Claimed { jobs: Vec<ClaimedJob>, cut: bool },
    /// What is left is reserved by calls under way: claim again once one of them has finished.
    Wait,
    /// The day's spend reached the budget: claim nothing until 00:00 UTC.
    Exhausted,
}

/// The claim of at most `batch` jobs under `budget_usd`, each costed by `estimate_usd`: the
/// claim (concurrent with other workers', `SKIP LOCKED`) and the decision each commit on their
/// own, so the fleet's lock is held for the decision's statement only. The jobs the budget
/// does not keep go back untouched (no attempt spent); until then they hold no reservation,
/// so no other worker's decision counts them.
pub async fn claim_within(
    client: &db::Client,
    budget_usd: f64,
    (worker, batch, lease, serves, lanes): (&str, i64, Duration, Serves, Lanes),
    estimate_usd: impl Fn(&ClaimedJob) -> f64,
) -> Result<Budgeted> {
    let jobs = claim::claim(client, worker, batch, lease, serves, lanes).await?;
    let (budgeted, returned) = keep_affordable(client, budget_usd, jobs, estimate_usd).await?;
    claim::unclaim(client, &returned).await?;
    Ok(budgeted)
}

/// Of the jobs just claimed, keeps what the budget affords (see `budget_keep`) and returns
/// the rest beside the decision, for the caller to give back (or to roll back with its
/// transaction). Online claims and provider batches (whose lines stay `processing` until
/// their results are costed) both go through here.
pub async fn keep_affordable(
    client: &impl GenericClient,
    budget_usd: f64,
    mut jobs: Vec<ClaimedJob>,
    estimate_usd: impl Fn(&ClaimedJob) -> f64,
) -> Result<(Budgeted, Vec<ClaimedJob>)> {
    if jobs.is_empty() {
        return Ok((Budgeted::Claimed { jobs, cut: false }, Vec::new()));
    }
    let ids: Vec<i64> = jobs.iter().map(|job| job.id.0).collect();
    let estimates: Vec<f64> = jobs.iter().map(&estimate_usd).collect();
    let keep = client.prepare_cached(KEEP).await?;
    let row = client
        .query_one(&keep, &[&ids, &estimates, &budget_usd])
        .await?;
    let (spent_usd, kept): (f64, i32) = (row.get(0), row.get(2));
    metric::spent_today(spent_usd);
    let returned = jobs.split_off(kept as usize);
    let budgeted = match (jobs.is_empty(), spent_usd >= budget_usd) {
        (false, _) => Budgeted::Claimed {
            cut: !returned.is_empty(),
            jobs,
        },
        (true, false) => Budgeted::Wait,
        (true, true) => {
            tracing::warn!(budget_usd, spent_usd, "daily budget spent: not claiming");
            metric::budget_exhausted();
            Budgeted::Exhausted
        }
    };
    Ok((budgeted, returned))
}
