//! The next claim of an invocation: the provider's breaker, the budget and the lanes decide
//! how many jobs, if any, and whether claiming may go on after them.

use std::{sync::atomic::Ordering, time::Instant};

use tokio_util::sync::CancellationToken;

use super::{Holds, Worker, WRITE_MARGIN};
use crate::{
    db,
    domain::error::Result,
    pipeline::{
        limits::{breaker, budget},
        outbox::{
            budgeted::{self, Budgeted},
            claim::{self, Serves},
            ClaimedJob, Lanes,
        },
        pause::Paused,
    },
    providers::Provider,
};

/// One claim: the jobs, whether claiming may go on (at once, or once a job of this
/// invocation has finished), and whether the budget stopped it.
pub(super) struct Claimed {
    pub(super) jobs: Vec<ClaimedJob>,
    pub(super) more: bool,
    pub(super) after_a_job: bool,
    pub(super) budget_exhausted: bool,
}

impl Claimed {
    pub(super) const NOTHING: Claimed = Claimed {
        jobs: Vec::new(),
        more: false,
        after_a_job: false,
        budget_exhausted: false,
    };
}

impl<P: Provider> Worker<P> {
    /// The next batch, and whether claiming may go on after it.
    pub(super) async fn claim_next(
        &self,
        deadline: Instant,
        stop: &CancellationToken,
        holds: &Holds,
        (grant, paused): (&budget::Grant, Paused),
    ) -> Result<Claimed> {
        let policy = &self.config.worker;
        if stop.is_cancelled() || holds.any() || !self.call_fits(deadline) {
            return Ok(Claimed::NOTHING);
        }
        let client = db::client(&self.pool).await?;
        self.expired.return_due(&client).await?;
        let gate = breaker::gate(
            &client,
            self.provider.name(),
            policy.call_timeout + WRITE_MARGIN,
        )
        .await?;
        let batch = match gate {
            breaker::Gate::Closed {
                counting,
                rate_held,
                announced,
            } => {
                holds.breaker_counting.store(counting, Ordering::Relaxed);
                self.limiter.adopt(announced);
                if rate_held {
                    self.limiter.engage();
                }
                policy.batch_size
            }
            // One item tests the provider; the rest waits for the next invocation.
            breaker::Gate::Probe => 1,
            breaker::Gate::Open { until } => {
                tracing::info!(provider = self.provider.name(), %until, "provider paused: not claiming");
                holds.provider_paused.store(true, Ordering::Relaxed);
                return Ok(Claimed::NOTHING);
            }
        };
        let serves = Serves::for_model_version(&self.config.versions.model);
        let (id, lease, lanes) = (
            self.id.as_str(),
            policy.lease,
            Lanes {
                eval_only: self.eval_only,
                ..Lanes::from_policy(policy, paused)
            },
        );
        let (jobs, cut) = match policy.daily_budget_usd {
            None => (
                claim::claim(&client, id, batch, lease, serves, lanes).await?,
                false,
            ),
            Some(budget_usd) => {
                let claim = (id, batch, lease, serves, lanes);
                let estimate = |job: &ClaimedJob| self.estimate_usd(job, self.tier(job));
                match budgeted::claim_within(&client, budget_usd, claim, estimate, grant).await? {
                    Budgeted::Claimed { jobs, cut } => (jobs, cut),
                    Budgeted::Wait => {
                        return Ok(Claimed {
                            more: true,
                            after_a_job: true,
                            ..Claimed::NOTHING
                        })
                    }
                    Budgeted::Exhausted => {
                        return Ok(Claimed {
                            budget_exhausted: true,
                            ..Claimed::NOTHING
                        })
                    }
                }
            }
        };
        // A full batch means there may be more; one the budget cut short decides again once a
        // call has ended (with these reserved); the probe's single item decides nothing.
        let closed = matches!(gate, breaker::Gate::Closed { .. });
        let more = closed && (cut || jobs.len() as i64 == batch);
        Ok(Claimed {
            jobs,
            more,
            after_a_job: more && cut,
            ..Claimed::NOTHING
        })
    }

    /// The invocation's budget grant goes back to the fleet; if the database is away, its row
    /// lapses with the jobs' lease instead.
    pub(super) async fn release(&self, grant: &budget::Grant) {
        if let Err(error) = grant.release(&self.pool, &self.id).await {
            tracing::warn!(error = %error.report(), "budget grant not released: it lapses");
        }
    }

    /// Whether one more call and its write fit before `deadline`.
    pub(super) fn call_fits(&self, deadline: Instant) -> bool {
        Instant::now() + self.config.worker.call_timeout + WRITE_MARGIN <= deadline
    }
}
