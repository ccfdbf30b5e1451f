//! One worker invocation (article steps 3–5): claim while there is time, check for an existing
//! result before spending, evaluate with bounded concurrency, and end every job's turn with a
//! fenced write. Run by the worker Lambda (deadline from the Lambda context) and by
//! `triage worker` (deadline from `TRIAGE_INVOCATION_SECONDS`).

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

use crate::{
    backoff, breaker,
    config::Config,
    db,
    error::{ConfigError, Result},
    evaluate::{
        contract, ErrorClass, EvaluationRequest, FailureKind, ModelVersion, Policy, Prompt,
        Provider, ProviderError,
    },
    ledger::{self, CallRecord},
    outbox::{
        claim::{self, Serves},
        dead_letter::dead_letter,
        finish,
        reschedule::{release, reschedule},
        ClaimedJob, Fencing,
    },
    prompt_registry,
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

/// What finished among an invocation's concurrent tasks.
enum Task {
    Job(Result<Outcome>),
    Claim(Result<(Vec<ClaimedJob>, bool)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Evaluated,
    DedupHit,
    Rescheduled { reason: &'static str },
    Released,
    DeadLettered { reason: &'static str },
    Fenced,
}

impl Report {
    fn count(&mut self, outcome: Outcome) {
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

pub struct Worker<P> {
    pool: Pool,
    provider: P,
    config: Arc<Config>,
    id: String,
    policy: Policy,
    prompts: HashMap<&'static str, Prompt>,
    /// Set once the prompt registry accepted this build's prompt texts.
    prompts_verified: tokio::sync::OnceCell<()>,
}

impl<P: Provider> Worker<P> {
    /// Refuses a configuration whose lease could expire under a call that is still running.
    pub fn new(pool: Pool, provider: P, config: Arc<Config>) -> Result<Self> {
        let policy = Policy::load(&config.versions.policy).ok_or_else(|| {
            ConfigError::invalid(
                "TRIAGE_POLICY_VERSION",
                format!("{:?} is not in this build", config.versions.policy),
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
            .filter_map(|v| Some((v, Prompt::load(v, &policy)?)))
            .collect();
        let id = format!(
            "{}-{}",
            provider.name(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Ok(Self {
            pool,
            provider,
            config,
            id,
            policy,
            prompts,
            prompts_verified: tokio::sync::OnceCell::new(),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// One invocation, until `deadline` or until there is nothing to claim. `stop` ends
    /// claiming early (SIGTERM); work already claimed is finished or released.
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
                    report.count(outcome?);
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
            tracing::info!(worker = %self.id, ?report, "worker invocation finished");
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
        if stop.is_cancelled() || Instant::now() + policy.call_timeout + WRITE_MARGIN > deadline {
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
        let serves = Serves::for_model_version(&self.config.versions.model);
        let jobs = claim::claim(&client, &self.id, batch, policy.lease, serves).await?;
        let more = batch > 1 && jobs.len() as i64 == batch;
        Ok((jobs, more))
    }

    async fn process(
        &self,
        job: ClaimedJob,
        deadline: Instant,
        paused: &AtomicBool,
    ) -> Result<Outcome> {
        let policy = &self.config.worker;
        let client = db::client(&self.pool).await?;
        if paused.load(Ordering::Relaxed)
            || Instant::now() + policy.call_timeout + WRITE_MARGIN > deadline
        {
            // Not started: the attempt the claim counted is given back.
            return fenced(
                release(&**client, &job, Duration::ZERO, None).await?,
                Outcome::Released,
            );
        }
        let Some(prompt) = self.prompts.get(job.prompt_version.as_str()) else {
            // A result made by a build that knew the version still answers this job.
            if finish::result_exists(&client, &job).await? {
                return dedup_hit(&client, &job).await;
            }
            let error = format!(
                "prompt version {:?} is not in this build",
                job.prompt_version
            );
            return dead(&client, &job, &error, "unknown_prompt_version").await;
        };
        let model = ModelVersion::parse(&job.model_version);
        let request = EvaluationRequest {
            subject: &job.subject,
            message: &job.message,
            prompt,
            model: &model,
            policy: &self.policy,
            timeout: policy.call_timeout,
        };

        // Article step 4, the line that saves money, in the same statement as the ledger row.
        let Some(call) =
            ledger::start_call_unless_evaluated(&client, &job, &self.id, self.provider.name())
                .await?
        else {
            return dedup_hit(&client, &job).await;
        };
        // The connection goes back to the pool while the provider thinks: a slow model must not
        // pin one connection per call in flight.
        drop(client);
        let started = Instant::now();
        let result = match tokio::time::timeout(
            policy.call_timeout + WRITE_MARGIN,
            self.provider.evaluate(request),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(ProviderError::new(
                FailureKind::Timeout,
                "call exceeded its timeout",
            )),
        };
        let latency = started.elapsed();

        let mut client = db::client(&self.pool).await?;
        match result {
            Ok(reply) => {
                let checked = contract::validate(&reply.output, &self.policy);
                let record = CallRecord {
                    outcome: if checked.is_ok() {
                        "ok"
                    } else {
                        "contract_violation"
                    },
                    error_class: checked.is_err().then_some(ErrorClass::Permanent.name()),
                    http_status: Some(reply.http_status),
                    billed: Some(true),
                    usage: reply.usage,
                    cost_usd: self.config.provider.prices.cost(&model.model, reply.usage),
                    latency,
                };
                metric::provider_call(latency, reply.usage, record.cost_usd);
                // Independent writes, pipelined on one connection: one round trip, not three.
                let (_, _, outcome) = tokio::try_join!(
                    ledger::finish_call(&client, call, &record),
                    breaker::record_success(&client, self.provider.name()),
                    async {
                        match checked {
                            Ok(evaluation) => {
                                let fencing = finish::complete(
                                    &client,
                                    &job,
                                    &evaluation,
                                    &self.config.versions,
                                )
                                .await?;
                                tracing::info!(key = %job.key, outbox_id = job.id.0, latency_ms = latency.as_millis() as u64, "evaluated");
                                fenced(fencing, Outcome::Evaluated)
                            }
                            Err(violation) => {
                                let reason = FailureKind::ContractViolation.reason();
                                dead(&client, &job, &violation.to_string(), reason).await
                            }
                        }
                    }
                )?;
                Ok(outcome)
            }
            Err(error) => {
                let class = error.kind.class();
                let record = CallRecord {
                    outcome: error.kind.reason(),
                    error_class: Some(class.name()),
                    http_status: error.http_status,
                    // A timed-out request may still have been served and billed.
                    billed: (error.kind != FailureKind::Timeout).then_some(false),
                    usage: Default::default(),
                    cost_usd: 0.0,
                    latency,
                };
                ledger::finish_call(&client, call, &record).await?;
                metric::provider_call(latency, Default::default(), 0.0);
                self.after_failure(&mut client, &job, &error, paused).await
            }
        }
    }

    /// The error table in action: permanent → dead letter; provider-wide (or an outage seen
    /// across items) → pause and give the attempt back; transient → backoff or, at the
    /// maximum, dead letter.
    async fn after_failure(
        &self,
        client: &mut deadpool_postgres::Client,
        job: &ClaimedJob,
        error: &ProviderError,
        paused: &AtomicBool,
    ) -> Result<Outcome> {
        let policy = &self.config.worker;
        let reason = error.kind.reason();
        tracing::warn!(key = %job.key, outbox_id = job.id.0, reason, error = %error, "provider call failed");
        if error.kind.class() == ErrorClass::Permanent {
            // The provider answered: whatever outage there was is over.
            breaker::record_success(&*client, self.provider.name()).await?;
            return dead(client, job, &error.to_string(), reason).await;
        }
        let open = breaker::record_failure(
            client,
            self.provider.name(),
            error.kind,
            &error.to_string(),
            policy,
        )
        .await?;
        let conn: &tokio_postgres::Client = client;
        if open {
            paused.store(true, Ordering::Relaxed);
            return fenced(
                release(conn, job, Duration::ZERO, Some(&error.to_string())).await?,
                Outcome::Released,
            );
        }
        if job.attempts >= policy.max_attempts {
            let message = format!("max attempts ({}): {error}", policy.max_attempts);
            return dead(conn, job, &message, "attempts_exhausted").await;
        }
        let delay = backoff::retry_delay(policy, &job.key, job.attempts, error.retry_after);
        fenced(
            reschedule(conn, job, delay, &error.to_string(), reason).await?,
            Outcome::Rescheduled { reason },
        )
    }
}

async fn dedup_hit(client: &db::Client, job: &ClaimedJob) -> Result<Outcome> {
    tracing::info!(key = %job.key, outbox_id = job.id.0, "result exists: no call");
    fenced(
        finish::complete_from_existing_result(client, job).await?,
        Outcome::DedupHit,
    )
}

async fn dead(
    client: &tokio_postgres::Client,
    job: &ClaimedJob,
    error: &str,
    reason: &'static str,
) -> Result<Outcome> {
    fenced(
        dead_letter(client, job, error, reason).await?,
        Outcome::DeadLettered { reason },
    )
}

/// The outcome of a fenced write, counted in the metrics only when it took effect.
fn fenced(fencing: Fencing, outcome: Outcome) -> Result<Outcome> {
    Ok(match fencing {
        Fencing::Held => {
            match &outcome {
                Outcome::Evaluated => metric::evaluated(),
                Outcome::DedupHit => metric::dedup_hit(),
                Outcome::Rescheduled { reason } => metric::rescheduled(reason),
                Outcome::DeadLettered { reason } => metric::dead_letter(reason),
                Outcome::Released | Outcome::Fenced => {}
            }
            outcome
        }
        Fencing::Lost => {
            tracing::warn!(
                ?outcome,
                "lease lost: another worker holds the job; nothing written"
            );
            Outcome::Fenced
        }
    })
}

/// `triage worker` without `--once`: invocations back to back until `stop`, idling briefly
/// when there is nothing to do. In-flight work finishes before it returns.
pub async fn run_until_stopped<P: Provider>(
    worker: &Worker<P>,
    idle: Duration,
    stop: CancellationToken,
) -> Result<()> {
    while !stop.is_cancelled() {
        let deadline = Instant::now() + worker.config.worker.invocation_budget;
        let report = worker.run_invocation(deadline, &stop).await;
        match report {
            Ok(report) if report.claimed > 0 && !report.paused => continue,
            Ok(_) => {}
            Err(error) if error.is_unavailable() => {
                tracing::warn!(%error, "database unavailable; retrying")
            }
            Err(error) => return Err(error),
        }
        tokio::select! { _ = stop.cancelled() => {}, _ = tokio::time::sleep(idle) => {} }
    }
    Ok(())
}

/// The Lambda context's deadline (milliseconds since the epoch) as an `Instant`.
pub fn deadline_from_epoch_ms(deadline_ms: u64) -> Instant {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}
