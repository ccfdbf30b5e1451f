//! The daily spend budget (`TRIAGE_DAILY_BUDGET_USD`, OWASP LLM10): what the attempt ledger
//! says was spent since 00:00 UTC, plus every claimed job reserved at the estimated cost of a
//! call, decides how many jobs a worker may claim. When nothing is left, workers stop claiming:
//! jobs stay pending with no attempt spent, and the next UTC day they go on.
//!
//! Reading the spend and claiming happen in one transaction under one advisory lock, so two
//! workers never both claim the same headroom: each overshoots by at most the one call its
//! estimate was short of. [`allowance`] is the decision, pure and tested by a table; [`spend`]
//! its one statement; [`claim_within`] the claim under it.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use crate::{
    db,
    domain::error::Result,
    pipeline::outbox::{
        claim::{self, Serves},
        ClaimedJob, Lanes,
    },
    telemetry::metric,
};

/// What the ledger and the queue say about today's money.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    /// Cost of the calls started since 00:00 UTC.
    pub spent_today_usd: f64,
    /// Jobs claimed under a live lease: each may make one call that is not costed yet.
    pub reserved_calls: i64,
    /// Average cost of a billed call over the last day; `None` before the first one.
    pub estimated_call_usd: Option<f64>,
}

/// How many jobs a claim may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    Claim(i64),
    /// What is left is reserved by calls under way (or none has been costed yet and one is
    /// under way): claim again once one of them has finished.
    Wait,
    /// The day's spend reached the budget: claim nothing until 00:00 UTC.
    Exhausted,
}

/// The budget decision: no budget, the whole batch; else the calls that fit in what is left
/// after the spend and the reservations, rounded up (so at most one call too many); while no
/// call has been costed yet, one at a time.
pub fn allowance(budget_usd: Option<f64>, spend: &Spend, batch: i64) -> Allowance {
    let Some(budget) = budget_usd else {
        return Allowance::Claim(batch);
    };
    if spend.spent_today_usd >= budget {
        return Allowance::Exhausted;
    }
    let Some(per_call) = spend.estimated_call_usd else {
        return match spend.reserved_calls {
            0 => Allowance::Claim(1),
            _ => Allowance::Wait,
        };
    };
    if per_call <= 0.0 {
        // Costed calls that were free: nothing to reserve.
        return Allowance::Claim(batch);
    }
    let left = budget - spend.spent_today_usd - spend.reserved_calls.max(0) as f64 * per_call;
    if left <= 0.0 {
        return Allowance::Wait;
    }
    let calls = (left / per_call).ceil().min(batch as f64) as i64;
    Allowance::Claim(calls.max(1))
}

/// Serialises budget decisions across workers for the rest of the caller's transaction.
/// The number is arbitrary; it only has to differ from other advisory locks.
const LOCK: &str = "SELECT pg_advisory_xact_lock(7431001)";

const SPEND: &str = r#"
SELECT coalesce(sum(cost_usd) FILTER (
           WHERE started_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'), 0)::float8,
       (SELECT count(*) FROM evaluation_outbox WHERE status = 'processing' AND locked_until >= now()),
       (avg(cost_usd) FILTER (WHERE billed))::float8
FROM provider_call
WHERE started_at >= least(date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
                          now() - interval '1 day')
"#;

/// Today's spend, the reservations and the estimate, in one statement.
pub async fn spend(client: &impl GenericClient) -> Result<Spend> {
    let row = client.query_one(SPEND, &[]).await?;
    Ok(Spend {
        spent_today_usd: row.get(0),
        reserved_calls: row.get(1),
        estimated_call_usd: row.get(2),
    })
}

/// How many of `lines` bulk jobs a provider batch may take under `budget_usd`, decided under
/// the lock every claim takes, in the caller's transaction (which then claims them). A
/// batch's jobs stay `processing` under a live lease, so until its lines are costed the budget
/// counts each at the estimate, like a call under way.
pub async fn lines_within(client: &impl GenericClient, budget_usd: f64, lines: i64) -> Result<i64> {
    client.execute(LOCK, &[]).await?;
    let spend = spend(client).await?;
    Ok(match allowance(Some(budget_usd), &spend, lines) {
        Allowance::Claim(lines) => lines,
        Allowance::Wait | Allowance::Exhausted => 0,
    })
}

/// What a claim under the budget took.
#[derive(Debug)]
pub enum Budgeted {
    /// `jobs`, of the `allowed` the budget left room for.
    Claimed {
        jobs: Vec<ClaimedJob>,
        allowed: i64,
    },
    /// See [`Allowance::Wait`].
    Wait,
    Exhausted,
}

/// The claim of at most `batch` jobs under `budget_usd`: lock, spend, decision and claim in
/// one transaction, so the claim is the only one spending this headroom.
pub async fn claim_within(
    client: &mut db::Client,
    budget_usd: f64,
    worker: &str,
    batch: i64,
    lease: Duration,
    serves: Serves,
    lanes: Lanes,
) -> Result<Budgeted> {
    let transaction = client.transaction().await?;
    transaction.execute(LOCK, &[]).await?;
    let spend = spend(&transaction).await?;
    metric::spent_today(spend.spent_today_usd);
    let allowed = match allowance(Some(budget_usd), &spend, batch) {
        Allowance::Claim(allowed) => allowed,
        Allowance::Wait => return Ok(Budgeted::Wait),
        Allowance::Exhausted => {
            let spent_usd = spend.spent_today_usd;
            tracing::warn!(budget_usd, spent_usd, "daily budget spent: not claiming");
            metric::budget_exhausted();
            return Ok(Budgeted::Exhausted);
        }
    };
    let jobs = claim::claim(&transaction, worker, allowed, lease, serves, lanes).await?;
    transaction.commit().await?;
    Ok(Budgeted::Claimed { jobs, allowed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Allowance::*;

    fn spend(spent: f64, reserved: i64, estimate: Option<f64>) -> Spend {
        Spend {
            spent_today_usd: spent,
            reserved_calls: reserved,
            estimated_call_usd: estimate,
        }
    }

    #[test]
    fn claims_are_cut_to_what_the_budget_has_left() {
        // (budget, spend, batch, expected)
        let table = [
            (None, spend(1e9, 100, Some(1.0)), 10, Claim(10)),
            (Some(1.0), spend(0.0, 0, None), 10, Claim(1)),
            (Some(1.0), spend(0.0, 1, None), 10, Wait),
            (Some(1.0), spend(0.0, 0, Some(0.1)), 10, Claim(10)),
            (Some(1.0), spend(0.5, 0, Some(0.1)), 10, Claim(5)),
            (Some(1.0), spend(0.5, 2, Some(0.1)), 10, Claim(3)),
            (Some(1.0), spend(0.95, 0, Some(0.1)), 10, Claim(1)),
            (Some(1.0), spend(0.5, 3, Some(0.0)), 10, Claim(10)),
            (Some(1.0), spend(1.0, 0, Some(0.1)), 10, Exhausted),
            (Some(1.0), spend(1.2, 0, None), 10, Exhausted),
            (Some(1.0), spend(0.5, 5, Some(0.1)), 10, Wait),
            (Some(1.0), spend(0.5, 9, Some(0.1)), 10, Wait),
            (Some(0.0), spend(0.0, 0, None), 10, Exhausted),
        ];
        for (budget, spend, batch, expected) in table {
            assert_eq!(
                allowance(budget, &spend, batch),
                expected,
                "{budget:?} {spend:?}"
            );
        }
    }
}
