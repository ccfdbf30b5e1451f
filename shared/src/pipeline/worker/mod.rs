//! One worker invocation (article steps 3–5): claim while there is time, check for an existing
//! result before spending, evaluate with bounded concurrency, and end every job's turn with a
//! fenced write. Run by the worker Lambda (deadline from the Lambda context) and by
//! `triage worker` (deadline from `TRIAGE_INVOCATION_SECONDS`).
//!
//! [`process`] is one job's turn, [`disposition`] the pure decision after it, [`run`] the
//! long-running loop of `triage worker`.

mod pacing;
mod disposition;
mod process;
mod run;

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use deadpool_postgres::Pool;
use futures::{future::Either, stream::FuturesUnordered, FutureExt, StreamExt};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use disposition::{disposition, Disposition, Turn};
pub use run::run_until_stopped;

use crate::{
    config::Config,
    db,
    domain::{
        error::{ConfigError, Result},
        versions::PromptVersion,
    },
    evaluate::{Policy, Prompt, Provider},
    pipeline::{
        breaker,
        outbox::{
            claim::{self, Serves},
            ClaimedJob,
        },
        prompt_registry,
        rate_limit::Limiter,
    },
    telemetry::metric,
};

/// Time kept back after a call for its writes: no call starts unless it and its write can
/// finish before the deadline.
const WRITE_MARGIN: Duration = Duration::from_secs(1);

/// What one invocation did; also the worker Lambda's response.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Report {
    pub claimed: u32,
    pub evaluated: u32,
    pub dedup_hits: u32,
    pub rescheduled: u32,
    pub released: u32,
    pub dead_lettered: u32,
    pub fenced: u32,
    /// Claiming stopped because the provider's circuit breaker is open.
    pub paused: bool,
}

/// How one job's turn ended, as far as this worker could write it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Evaluated,
    DedupHit,
    Rescheduled {
        reason: &'static str,
    },
    Released,
    DeadLettered {
        reason: &'static str,
    },
    /// The lease was lost: another worker holds the job, nothing was written.
    Fenced,
}

impl Report {
    fn count(&mut self, outcome: &Outcome) {
        let field = match outcome {
            Outcome::Evaluated => &mut self.evaluated,
            Outcome::DedupHit => &mut self.dedup_hits,
            Outcome::Rescheduled { .. } => &mut self.rescheduled,
            Outcome::Released => &mut self.released,
            Outcome::DeadLettered { .. } => &mut self.dead_lettered,
            Outcome::Fenced => &mut self.fenced,
        };
        *field += 1;
    }
}

/// The metrics of a turn that took effect.
fn observe(outcome: &Outcome) {
    match outcome {
        Outcome::Evaluated => metric::evaluated(),
        Outcome::DedupHit => metric::dedup_hit(),
        Outcome::Rescheduled { reason } => metric::rescheduled(reason),
        Outcome::DeadLettered { reason } => metric::dead_letter(reason),
        Outcome::Released | Outcome::Fenced => {}
    }
}

/// What finished among an invocation's concurrent tasks.
enum Task {
    Job(Result<Outcome>),
    Claim(Result<(Vec<ClaimedJob>, bool)>),
}

pub struct Worker<P> {
    pool: Pool,
    provider: P,
    config: Arc<Config>,
    id: String,
    policy: Policy,
    prompts: HashMap<PromptVersion, Prompt>,
    /// Set once the prompt registry accepted this build's prompt texts.
    prompts_verified: tokio::sync::OnceCell<()>,
    limiter: Limiter,
}

impl<P: Provider> Worker<P> {
    /// Refuses a configuration whose lease could expire under a call that is still running.
    pub fn new(pool: Pool, provider: P, config: Arc<Config>) -> Result<Self> {
        let policy = Policy::load(config.versions.policy.as_str()).ok_or_else(|| {
            ConfigError::invalid(
                "TRIAGE_POLICY_VERSION",
                format!("{:?} is not in this build", config.versions.policy.as_str()),
            )
        })?;
        let worker = &config.worker;
        if worker.lease <= worker.call_timeout + WRITE_MARGIN {
            return Err(ConfigError::invalid(
                "TRIAGE_LEASE_SECONDS",
                format!(
                    "the lease ({:?}) must outlast one call plus its write ({:?} + {:?})",
                    worker.lease, worker.call_timeout, WRITE_MARGIN
                ),
            )
            .into());
        }
        let prompts = Prompt::known_versions()
            .filter_map(|v| Some((v.parse().ok()?, Prompt::load(v, &policy)?)))
            .collect();
        let id = format!(
            "{}-{}",
            provider.name(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let limiter = Limiter::new(config.rate_limit);
        Ok(Self {
            pool,
            provider,
            config,
            id,
            policy,
            prompts,
            prompts_verified: tokio::sync::OnceCell::new(),
            limiter,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// One invocation, until `deadline` or until there is nothing to claim. `stop` ends
    /// claiming early (SIGTERM); work already claimed is finished or released.
    #[tracing::instrument(skip_all, fields(worker = %self.id))]
    pub async fn run_invocation(
        &self,
        deadline: Instant,
        stop: &CancellationToken,
    ) -> Result<Report> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining >= self.config.worker.lease {
            return Err(ConfigError::invalid(
                "TRIAGE_LEASE_SECONDS",
                format!(
                    "the lease ({:?}) must outlast the invocation ({remaining:?}): raise the lease or shorten the timeout",
                    self.config.worker.lease
                ),
            )
            .into());
        }
        // Before the first claim: a worker whose prompt text changed under its version claims
        // nothing (see `prompt_registry`).
        self.prompts_verified
            .get_or_try_init(|| prompt_registry::verify(&self.pool, self.prompts.values()))
            .await?;
        let concurrency = self.config.worker.concurrency;
        let paused = AtomicBool::new(false);
        let mut report = Report::default();
        let mut queue: VecDeque<ClaimedJob> = VecDeque::new();
        // Jobs and the next claim run side by side: a claim waiting for a pooled connection
        // must not stop the jobs holding the connections from finishing.
        let mut tasks = FuturesUnordered::new();
        let (mut jobs_in_flight, mut claim_in_flight, mut claiming) = (0, false, true);
        loop {
            while jobs_in_flight < concurrency {
                let Some(job) = queue.pop_front() else { break };
                tasks.push(Either::Left(
                    self.process(job, deadline, &paused).map(Task::Job),
                ));
                jobs_in_flight += 1;
            }
            // The next batch is claimed as soon as the queue is empty, while the slots are still
            // busy: it is there when they free up, instead of every slot waiting for a claim
            // round trip after each batch (at most one batch waits, well inside its lease).
            if claiming && !claim_in_flight && queue.is_empty() {
                let claim = self.claim_next(deadline, stop, &paused);
                tasks.push(Either::Right(claim.map(Task::Claim)));
                claim_in_flight = true;
            }
            match tasks.next().await {
                None => break,
                Some(Task::Job(outcome)) => {
                    jobs_in_flight -= 1;
                    let outcome = outcome?;
                    observe(&outcome);
                    report.count(&outcome);
                }
                Some(Task::Claim(claimed)) => {
                    claim_in_flight = false;
                    let (jobs, more) = claimed?;
                    report.claimed += jobs.len() as u32;
                    queue.extend(jobs);
                    claiming = more;
                }
            }
        }
        report.paused = paused.load(Ordering::Relaxed);
        if report.claimed > 0 || report.paused {
            tracing::info!(?report, "worker invocation finished");
        }
        Ok(report)
    }

    /// The next batch, and whether claiming may go on after it.
    async fn claim_next(
        &self,
        deadline: Instant,
        stop: &CancellationToken,
        paused: &AtomicBool,
    ) -> Result<(Vec<ClaimedJob>, bool)> {
        let policy = &self.config.worker;
        if stop.is_cancelled() || !self.call_fits(deadline) {
            return Ok((Vec::new(), false));
        }
        let client = db::client(&self.pool).await?;
        let batch = match breaker::gate(
            &client,
            self.provider.name(),
            policy.call_timeout + WRITE_MARGIN,
        )
        .await?
        {
            breaker::Gate::Closed => policy.batch_size,
            // One item tests the provider; the rest waits for the next invocation.
            breaker::Gate::Probe => 1,
            breaker::Gate::Open { until } => {
                tracing::info!(provider = self.provider.name(), %until, "provider paused: not claiming");
                paused.store(true, Ordering::Relaxed);
                return Ok((Vec::new(), false));
            }
        };
        let serves = if self.config.versions.model.is_rules() {
            Serves::RulesOnly
        } else {
            Serves::Models
        };
        let jobs = claim::claim(&client, &self.id, batch, policy.lease, serves).await?;
        let more = batch > 1 && jobs.len() as i64 == batch;
        Ok((jobs, more))
    }

    /// Whether one more call and its write fit before `deadline`.
    fn call_fits(&self, deadline: Instant) -> bool {
        Instant::now() + self.config.worker.call_timeout + WRITE_MARGIN <= deadline
    }
}
