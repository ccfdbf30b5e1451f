//! The claim under the daily budget: the claim, the budget's decision on what it took
//! (`limits::budget`), and the jobs it does not keep given back untouched (no attempt spent).

use std::time::Duration;

use deadpool_postgres::GenericClient;

use super::{
    claim::{self, Serves},
    ClaimedJob, Lanes, OutboxId,
};
use crate::{
    db,
    domain::error::Result,
    pipeline::limits::budget::{self, Grant, Kept},
};

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
/// claim (concurrent with other workers', `SKIP LOCKED`), then, unless `grant` covers it, the
/// decision, each committing on its own, so the fleet's lock is held for the decision's
/// statement only. The jobs the budget does not keep go back untouched (no attempt spent);
/// until then they hold no reservation, so no other worker's decision counts them.
pub async fn claim_within(
    client: &db::Client,
    budget_usd: f64,
    (worker, batch, lease, serves, lanes): (&str, i64, Duration, Serves, Lanes),
    estimate_usd: impl Fn(&ClaimedJob) -> f64,
    grant: &Grant,
) -> Result<Budgeted> {
    let jobs = claim::claim(client, worker, batch, lease, serves, lanes).await?;
    if jobs.is_empty() {
        return Ok(Budgeted::Claimed { jobs, cut: false });
    }
    let (ids, estimates) = costed(&jobs, estimate_usd);
    let kept =
        budget::afford_claim(client, budget_usd, (worker, lease), &ids, &estimates, grant).await?;
    let (budgeted, returned) = split(jobs, kept);
    claim::unclaim(client, &returned).await?;
    Ok(budgeted)
}

/// Of the jobs just claimed, keeps what the budget affords (see `budget_keep`) and returns
/// the rest beside the decision, for the caller to give back (or to roll back with its
/// transaction). Provider batches (whose lines stay `processing` until their results are
/// costed) come here, without a grant.
pub async fn keep_affordable(
    client: &impl GenericClient,
    budget_usd: f64,
    jobs: Vec<ClaimedJob>,
    estimate_usd: impl Fn(&ClaimedJob) -> f64,
) -> Result<(Budgeted, Vec<ClaimedJob>)> {
    if jobs.is_empty() {
        return Ok((Budgeted::Claimed { jobs, cut: false }, Vec::new()));
    }
    let (ids, estimates) = costed(&jobs, estimate_usd);
    let kept = budget::afford(client, budget_usd, &ids, &estimates).await?;
    Ok(split(jobs, kept))
}

fn costed(
    jobs: &[ClaimedJob],
    estimate_usd: impl Fn(&ClaimedJob) -> f64,
) -> (Vec<OutboxId>, Vec<f64>) {
    (
        jobs.iter().map(|job| job.id).collect(),
        jobs.iter().map(estimate_usd).collect(),
    )
}

/// The jobs the budget kept (the first ones) as what the claim took, and the rest.
fn split(mut jobs: Vec<ClaimedJob>, kept: Kept) -> (Budgeted, Vec<ClaimedJob>) {
    let returned = jobs.split_off(kept.jobs.min(jobs.len()));
    let budgeted = match (jobs.is_empty(), kept.exhausted) {
        (false, _) => Budgeted::Claimed {
            cut: !returned.is_empty(),
            jobs,
        },
        (true, false) => Budgeted::Wait,
        (true, true) => Budgeted::Exhausted,
    };
    (budgeted, returned)
}
