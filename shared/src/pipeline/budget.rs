//! The daily spend budget (`TRIAGE_DAILY_BUDGET_USD`, OWASP LLM10): what the ledger's running
//! totals say was spent since 00:00 UTC, plus what every claimed job may still cost, decides
//! which jobs a worker may claim. When nothing is left, workers stop claiming: jobs stay
//! pending with no attempt spent, and the next UTC day they go on.
//!
//! Each job is held at its own worst case (its input tokens and the output cap, at its model's
//! price; the outbox's `reserved_usd`) from its claim until its ledger row carries the same
//! estimate as its cost, corrected once the usage is known (a timeout keeps the estimate). The
//! spend is one read of today's rows of `provider_call_hour` (migration V9), never a scan of
//! the day's calls, and survives erasure and retention. A claim takes its jobs, then reads it,
//! decides and reserves under one advisory lock, in one transaction, so two workers never
//! both claim the same headroom: the fleet overshoots by at most the one call that crossed the
//! line. [`headroom`] and
//! [`affordable`] are the decision, pure and tested by tables; [`spend`] its one statement;
//! [`claim_within`] the claim under it. docs/ledger.md has the design.

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
    /// What the jobs claimed under a live lease, whose call has no ledger row yet, may cost.
    pub reserved_usd: f64,
}

/// Whether a claim may take anything, before the jobs' own estimates are known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Headroom {
    /// This much is left after the spend and the reservations.
    Left(f64),
    /// What is left is reserved by calls under way: claim again once one of them has finished.
    Wait,
    /// The day's spend reached the budget: claim nothing until 00:00 UTC.
    Exhausted,
}

pub fn headroom(budget_usd: f64, spend: &Spend) -> Headroom {
    if spend.spent_today_usd >= budget_usd {
        return Headroom::Exhausted;
    }
    let left = budget_usd - spend.spent_today_usd - spend.reserved_usd.max(0.0);
    if left <= 0.0 {
        Headroom::Wait
    } else {
        Headroom::Left(left)
    }
}

/// How many of the claimed jobs (in claim order, at their estimates) the budget keeps: each
/// while some money is left before it, so only the last one kept may cross the line.
pub fn affordable(left_usd: f64, estimates_usd: &[f64]) -> usize {
    let mut left = left_usd;
    estimates_usd
        .iter()
        .take_while(|&&estimate| {
            let fits = left > 0.0;
            left -= estimate.max(0.0);
            fits
        })
        .count()
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

/// Serialises budget decisions across workers for the rest of the caller's transaction.
/// The number is arbitrary; it only has to differ from other advisory locks.
const LOCK: &str = "SELECT pg_advisory_xact_lock(7431001)";

/// A few rows of the running totals (one per hour, provider and workload of today), and the
/// claimed jobs whose calls have not started (served by the partial index on live leases).
const SPEND: &str = r#"
SELECT (SELECT coalesce(sum(cost_usd), 0)::float8 FROM provider_call_hour
        WHERE hour >= date_trunc('day', now(), 'UTC')),
       (SELECT coalesce(sum(o.reserved_usd), 0)::float8 FROM evaluation_outbox o
        WHERE o.status = 'processing' AND o.locked_until >= now() AND o.reserved_usd > 0
          AND NOT EXISTS (SELECT 1 FROM provider_call c
                          WHERE c.idempotency_key = o.idempotency_key AND c.attempt = o.attempts))
"#;

/// Today's spend and the reservations, in one statement.
pub async fn spend(client: &impl GenericClient) -> Result<Spend> {
    let statement = client.prepare_cached(SPEND).await?;
    let row = client.query_one(&statement, &[]).await?;
    Ok(Spend {
        spent_today_usd: row.get(0),
        reserved_usd: row.get(1),
    })
}

/// Holds each kept job's estimate against the budget until its call's ledger row carries it.
const RESERVE: &str = r#"
UPDATE evaluation_outbox o SET reserved_usd = r.usd
FROM unnest($1::bigint[], $2::float8[]) AS r(id, usd)
WHERE o.id = r.id
"#;

/// What a claim under the budget took.
#[derive(Debug)]
pub enum Budgeted {
    /// `jobs`; `cut` when the budget kept fewer than were claimable.
    Claimed {
        jobs: Vec<ClaimedJob>,
        cut: bool,
    },
    /// See [`Headroom::Wait`].
    Wait,
    Exhausted,
}

/// The claim of at most `batch` jobs under `budget_usd`, each costed by `estimate_usd`, in one
/// transaction: the claim first (concurrent with other workers', `SKIP LOCKED`), then
/// [`keep_affordable`], so the lock is held for a few short statements, not for the claim.
pub async fn claim_within(
    client: &mut db::Client,
    budget_usd: f64,
    (worker, batch, lease, serves, lanes): (&str, i64, Duration, Serves, Lanes),
    estimate_usd: impl Fn(&ClaimedJob) -> f64,
) -> Result<Budgeted> {
    let transaction = client.transaction().await?;
    let jobs = claim::claim(&transaction, worker, batch, lease, serves, lanes).await?;
    let budgeted = keep_affordable(&transaction, budget_usd, jobs, estimate_usd).await?;
    if matches!(budgeted, Budgeted::Claimed { .. }) {
        transaction.commit().await?;
    }
    Ok(budgeted)
}

/// Of the jobs just claimed in `transaction`, keeps what the budget affords, in claim order
/// at their estimates: under the lock only the read, the decision and the reservations. Jobs
/// past what is left go back untouched (no attempt spent); with nothing left the caller rolls
/// its transaction back and nothing was claimed. Online claims and provider batches (whose
/// lines stay `processing` until their results are costed) both go through here.
pub async fn keep_affordable(
    transaction: &impl GenericClient,
    budget_usd: f64,
    mut jobs: Vec<ClaimedJob>,
    estimate_usd: impl Fn(&ClaimedJob) -> f64,
) -> Result<Budgeted> {
    if jobs.is_empty() {
        return Ok(Budgeted::Claimed { jobs, cut: false });
    }
    let lock = transaction.prepare_cached(LOCK).await?;
    // One round trip: the read is queued behind the lock on the same connection.
    let locked = async { Ok(transaction.execute(&lock, &[]).await?) };
    let (_, spend) = tokio::try_join!(locked, spend(transaction))?;
    metric::spent_today(spend.spent_today_usd);
    let left = match headroom(budget_usd, &spend) {
        Headroom::Left(left) => left,
        Headroom::Wait => return Ok(Budgeted::Wait),
        Headroom::Exhausted => {
            let spent_usd = spend.spent_today_usd;
            tracing::warn!(budget_usd, spent_usd, "daily budget spent: not claiming");
            metric::budget_exhausted();
            return Ok(Budgeted::Exhausted);
        }
    };
    let estimates: Vec<f64> = jobs.iter().map(&estimate_usd).collect();
    let kept = affordable(left, &estimates);
    let cut = kept < jobs.len();
    let returned = jobs.split_off(kept);
    let ids: Vec<i64> = jobs.iter().map(|job| job.id.0).collect();
    let reserve = transaction.prepare_cached(RESERVE).await?;
    let kept_estimates = &estimates[..kept];
    let reserved = async {
        Ok(transaction
            .execute(&reserve, &[&ids, &kept_estimates])
            .await?)
    };
    tokio::try_join!(claim::unclaim(transaction, &returned), reserved)?;
    Ok(Budgeted::Claimed { jobs, cut })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Headroom::*;

    fn spend(spent: f64, reserved: f64) -> Spend {
        Spend {
            spent_today_usd: spent,
            reserved_usd: reserved,
        }
    }

    #[test]
    fn a_claim_sees_what_the_spend_and_the_reservations_leave() {
        // (budget, spend, expected)
        let table = [
            (1.0, spend(0.0, 0.0), Left(1.0)),
            (1.0, spend(0.5, 0.25), Left(0.25)),
            (1.0, spend(0.5, 0.5), Wait),
            (1.0, spend(0.5, 0.9), Wait),
            (1.0, spend(1.0, 0.0), Exhausted),
            (1.0, spend(1.2, 0.0), Exhausted),
            (0.0, spend(0.0, 0.0), Exhausted),
            (1.0, spend(0.0, -0.5), Left(1.0)),
        ];
        for (budget, spend, expected) in table {
            assert_eq!(headroom(budget, &spend), expected, "{budget} {spend:?}");
        }
    }

    #[test]
    fn jobs_are_kept_while_money_is_left_before_them_so_one_call_at_most_crosses_the_line() {
        // (left, estimates, kept)
        let table: [(f64, &[f64], usize); 7] = [
            (1.0, &[0.1, 0.1, 0.1], 3),
            (0.25, &[0.1, 0.1, 0.1, 0.1], 3),
            (0.2, &[0.1, 0.1, 0.1], 2),
            (0.01, &[5.0, 0.1], 1),
            (0.5, &[0.1, 5.0, 0.1], 2),
            (0.5, &[0.0, 0.0, 0.0], 3),
            (0.5, &[], 0),
        ];
        for (left, estimates, kept) in table {
            assert_eq!(affordable(left, estimates), kept, "{left} {estimates:?}");
        }
    }
}
