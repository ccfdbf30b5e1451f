//! One worker invocation (article steps 3–5): claim while there is time, check for an existing
//! result before spending, evaluate with bounded concurrency, and end every job's turn with a
//! fenced write. Run by the worker Lambda (deadline from the Lambda context) and by
//! `triage worker` (deadline from `TRIAGE_INVOCATION_SECONDS`).
//!
//! [`claiming`] is the next claim (breaker, budget, lanes), [`classifier_first`] a cascade's
//! first stage, [`process`] one job's turn, [`pacing`] its slot in the provider's shared rate
//! limit, [`settle`] its writes carried through a database blink, [`timing`] the time checks,
//! [`run`] the long-running loop of `triage worker`, [`batch_submit`] the invocation's turn
//! with the batch tier. Its claimed jobs' leases are renewed while it holds them
//! (`pipeline::outbox::renewal`), and each claim first returns a crashed worker's expired ones. What becomes of a turn is `pipeline::turn`; the daily spend budget
//! gates the claim (`pipeline::outbox::budgeted`).

mod batch_submit;
mod claiming;
mod classifier_first;
mod pacing;
mod process;
mod run;
mod settle;
mod timing;
mod write;

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Instant,
};

use deadpool_postgres::Pool;
use futures::{future::Either, stream::FuturesUnordered, FutureExt, StreamExt};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use crate::pipeline::turn::{disposition, Disposition, Turn};
pub use crate::pipeline::{batch_tier::BatchReport, outbox::submission::BATCH_LEASE};
pub use run::run_until_stopped;
pub use timing::WRITE_MARGIN;

use claiming::Claimed;

use crate::pipeline::turn::Outcome;

use crate::{
    config::Config,
    db,
    domain::error::{ConfigError, Result},
    pipeline::{
        answering::Policies,
        batch_tier::BatchTier,
        cascade::suspension::Suspended,
        limits::{budget, rate_limit::Limiter},
        outbox::{
            lease::Queue,
            renewal::{self, Expired, Held, Renewal},
            ClaimedJob, OutboxId,
        },
        pause::{self, Paused},
        prompt_registry,
    },
    providers::Provider,
    telemetry::metric,
};

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
    /// Jobs left to their lease because the database stayed away longer than it: their calls,
    /// if any were made, show as `in_flight` in the attempt ledger.
    pub abandoned: u32,
    /// Claiming stopped because the provider's circuit breaker is open.
    pub paused: bool,
    /// Claiming stopped because the database could not be reached.
    pub database_away: bool,
    /// Claiming stopped because today's spend reached `TRIAGE_DAILY_BUDGET_USD`.
    pub budget_exhausted: bool,
    /// New tickets given a cascade's local answer as provisional, the provider being away.
    pub provisional: u32,
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
            Outcome::Abandoned => &mut self.abandoned,
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
        Outcome::Abandoned => metric::abandoned(),
        Outcome::Released | Outcome::Fenced => {}
    }
}

/// What stops an invocation from claiming and from starting calls, seen by all its jobs.
#[derive(Debug)]
struct Holds {
    /// The provider's circuit breaker is open.
    provider_paused: AtomicBool,
    /// The last database round trip failed for want of a connection.
    database_away: AtomicBool,
    /// The breaker may need a success written: it was not closed and clean at the last claim,
    /// or a call failed since. Otherwise a success writes nothing.
    breaker_counting: AtomicBool,
    /// The jobs claimed and not yet ended, their leases renewed while they are held.
    leases: Held,
}

impl Default for Holds {
    fn default() -> Self {
        Self {
            provider_paused: AtomicBool::new(false),
            database_away: AtomicBool::new(false),
            // Until a claim has read the breaker.
            breaker_counting: AtomicBool::new(true),
            leases: Held::new(Queue::Evaluation),
        }
    }
}

impl Holds {
    fn any(&self) -> bool {
        self.provider_paused.load(Ordering::Relaxed) || self.database_away.load(Ordering::Relaxed)
    }
}

/// What finished among an invocation's concurrent tasks.
enum Task {
    Job(OutboxId, Result<Outcome>),
    Claim(Result<Claimed>),
}

pub struct Worker<P> {
    pool: Pool,
    provider: P,
    config: Arc<Config>,
    id: String,
    /// The policies its jobs are answered under, each loaded once (`pipeline::answering`).
    policies: Arc<Policies>,
    /// Set once the prompt registry accepted this build's prompt texts.
    prompts_verified: tokio::sync::OnceCell<()>,
    limiter: Limiter,
    /// The provider's batch API, when bulk work goes to batches.
    batches: Option<BatchTier>,
    /// Claims eval work only ([`Worker::eval_only`]).
    eval_only: bool,
    /// A crashed worker's jobs, returned before a claim once they expired.
    expired: Expired,
    /// The cascades suspended, read at each invocation's start (`cascade::suspension`).
    suspended: Suspended,
}

/// The worker's leases: `TRIAGE_LEASE_SECONDS`, renewed while held.
fn renewal_of(config: &Config) -> Renewal {
    Renewal {
        lease: config.worker.lease,
        max_attempts: config.worker.max_attempts,
    }
}

impl<P: Provider> Worker<P> {
    async fn verify_prompts(&self) -> Result<()> {
        let built_in = self.policies.built_in();
        prompt_registry::verify(&self.pool, built_in.prompts.values()).await?;
        let configured = self.config.versions.policy.as_str();
        if let Err(unusable) = self.policies.get(&self.pool, configured).await? {
            metric::taxonomy_unusable();
            tracing::error!(error = %unusable, "TRIAGE_POLICY_VERSION cannot be loaded: its jobs wait");
        }
        Ok(())
    }

    /// Refuses a configuration whose lease could expire under a call that is still running.
    pub fn new(pool: Pool, provider: P, config: Arc<Config>) -> Result<Self> {
        let worker = &config.worker;
        let prices = &config.provider.prices;
        if let Some(reason) =
            budget::unpriced(worker.daily_budget_usd, prices, &config.versions.model)
        {
            return Err(ConfigError::invalid("TRIAGE_PRICES", reason).into());
        }
        timing::check_policy(worker)?;
        let id = format!(
            "{}-{}",
            provider.name(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let limiter = Limiter::new(config.rate_limit);
        let policies = Arc::new(Policies::new());
        let expired = Expired::new(Queue::Evaluation, renewal_of(&config));
        let batches = BatchTier::new(pool.clone(), config.clone(), id.clone(), policies.clone())?;
        Ok(Self {
            pool,
            provider,
            config,
            id,
            policies,
            prompts_verified: tokio::sync::OnceCell::new(),
            limiter,
            batches,
            eval_only: false,
            expired,
            suspended: Suspended::default(),
        })
    }

    /// A worker for `triage eval`'s own process: it claims eval work only and sends no provider
    /// batch, so an operator's laptop pointed at production answers none of its tickets.
    pub fn eval_only(mut self) -> Self {
        self.eval_only = true;
        self
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
        let left = deadline.saturating_duration_since(Instant::now());
        if let Err(refused) = timing::check_time_left(left, &self.config.worker) {
            metric::invocation_refused(&refused.name);
            return Err(refused.into());
        }
        // Before the first claim: a worker whose prompt text changed under its version claims
        // nothing (see `prompt_registry`). The configured policy is loaded with it, so that the
        // first claim's estimates have its prompts.
        self.prompts_verified
            .get_or_try_init(|| self.verify_prompts())
            .await?;
        // An operator's pause holds for the whole invocation: read once, at its start.
        let client = db::client(&self.pool).await?;
        let paused = pause::paused(&client).await?;
        // So is a cascade's suspension (its classifier answers nothing locally).
        self.suspended.refresh(&client).await?;
        drop(client);
        if paused.interactive || paused.bulk {
            tracing::info!(lanes = ?paused.names(), "lanes paused by an operator: not claimed from");
        }
        // The batch tier's turn runs beside the online work, never before it: new tickets do
        // not wait while a batch's lines are written (lines that fall back online are claimed
        // by this invocation if it still claims, else by the next).
        let tend = async {
            match self.tend(deadline, paused).await {
                Err(error) if error.is_unavailable() => {
                    tracing::warn!(error = %error.report(), "database unavailable: batches wait");
                    Ok(())
                }
                tended => tended.map(drop),
            }
        };
        let (tended, online) = tokio::join!(tend, self.run_online(deadline, stop, paused));
        tended?;
        let mut report = online?;
        self.give_provisional(&mut report).await;
        Ok(report)
    }

    /// The online part of an invocation: claims and calls until `deadline`, `stop`, or
    /// nothing to claim, the claimed jobs' leases renewed meanwhile.
    async fn run_online(
        &self,
        deadline: Instant,
        stop: &CancellationToken,
        paused: Paused,
    ) -> Result<Report> {
        let holds = Holds::default();
        let renewal = renewal_of(&self.config);
        let done = CancellationToken::new();
        let work = async {
            let report = self.claim_and_call(deadline, stop, paused, &holds).await;
            done.cancel();
            report
        };
        let renewing = renewal::keep_renewed(&self.pool, &holds.leases, renewal, &done);
        let (report, ()) = tokio::join!(work, renewing);
        let mut report = report?;
        report.paused = holds.provider_paused.load(Ordering::Relaxed);
        report.database_away = holds.database_away.load(Ordering::Relaxed);
        if report.claimed > 0 || report.paused || report.database_away || report.budget_exhausted {
            tracing::info!(?report, "worker invocation finished");
        }
        Ok(report)
    }

    async fn claim_and_call(
        &self,
        deadline: Instant,
        stop: &CancellationToken,
        paused: Paused,
        holds: &Holds,
    ) -> Result<Report> {
        let concurrency = self.config.worker.concurrency;
        let mut report = Report::default();
        let mut queue: VecDeque<ClaimedJob> = VecDeque::new();
        // The concurrency is of calls (SPEC: concurrent calls per invocation): a job holds one
        // of these call slots for its call only, so the next call starts as soon as one ends,
        // its ledger row written meanwhile and the last call's writes still under way.
        let calls = Semaphore::new(concurrency);
        let grant = budget::Grant::default();
        // Jobs and the next claim run side by side: a claim waiting for a pooled connection
        // must not stop the jobs holding the connections from finishing.
        let mut tasks = FuturesUnordered::new();
        let (mut jobs_in_flight, mut claim_in_flight, mut claiming) = (0, false, true);
        // The budget's room is held by calls under way: the next claim waits for one to end.
        let mut after_a_job = false;
        // Jobs started ahead of a free call slot, their ledger rows written while the calls
        // run, so that a slot that frees starts its next call at once. As many as the slots:
        // calls started together end together (a batch's, an invocation's first), and jitter
        // spreads them out only over hundreds of turns; C / 4 left three quarters of the slots
        // waiting for starts at every such wave (docs/ledger.md).
        let ahead = concurrency;
        loop {
            while jobs_in_flight < concurrency + ahead {
                let Some(job) = queue.pop_front() else { break };
                let id = job.id;
                tasks.push(Either::Left(
                    self.process(job, deadline, holds, (&calls, &grant))
                        .map(move |outcome| Task::Job(id, outcome)),
                ));
                jobs_in_flight += 1;
            }
            // The next batch is claimed as soon as the queue is empty, while the slots are still
            // busy: it is there when they free up, instead of every slot waiting for a claim
            // round trip after each batch (at most one batch waits, well inside its lease).
            if claiming && !after_a_job && !claim_in_flight && queue.is_empty() {
                let claim = self.claim_next(deadline, stop, holds, (&grant, paused));
                tasks.push(Either::Right(claim.map(Task::Claim)));
                claim_in_flight = true;
            }
            match tasks.next().await {
                None => break,
                Some(Task::Job(id, outcome)) => {
                    holds.leases.release(id.0);
                    jobs_in_flight -= 1;
                    after_a_job = false;
                    let outcome = outcome?;
                    observe(&outcome);
                    report.count(&outcome);
                }
                Some(Task::Claim(claimed)) => {
                    claim_in_flight = false;
                    let claimed = match claimed {
                        // The jobs in flight still settle; no further claim this invocation.
                        Err(error) if error.is_unavailable() => {
                            tracing::warn!(error = %error.report(), "database unavailable: not claiming");
                            holds.database_away.store(true, Ordering::Relaxed);
                            Claimed::NOTHING
                        }
                        claimed => claimed?,
                    };
                    for job in &claimed.jobs {
                        holds.leases.hold(job.id.0, job.claim_token);
                    }
                    report.claimed += claimed.jobs.len() as u32;
                    report.budget_exhausted |= claimed.budget_exhausted;
                    queue.extend(claimed.jobs);
                    claiming = claimed.more;
                    after_a_job = claimed.after_a_job;
                }
            }
        }
        self.release(&grant).await;
        Ok(report)
    }
}
