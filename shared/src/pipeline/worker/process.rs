//! One claimed job's turn: a slot in the shared rate limit, the dedup check on the ledger
//! insert, the call with no pooled connection held, the ledger, breaker and rate-limit
//! updates, then the [`disposition`] carried out by the job's own fenced method.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use super::{disposition, Disposition, Outcome, Turn, Worker, WRITE_MARGIN};
use crate::{
    db,
    domain::error::Result,
    evaluate::{
        contract, ErrorClass, EvaluationRequest, FailureKind, Provider, ProviderError,
        ProviderReply,
    },
    pipeline::{
        breaker,
        ledger::{self, CallOutcome, CallRecord},
        outbox::{ClaimedJob, Fencing},
        rate_limit::Take,
    },
    telemetry::metric,
};

impl<P: Provider> Worker<P> {
    #[tracing::instrument(
        skip_all,
        fields(key = %job.key, outbox_id = job.id.0, attempt = job.attempts)
    )]
    pub(super) async fn process(
        &self,
        job: ClaimedJob,
        deadline: Instant,
        paused: &AtomicBool,
    ) -> Result<Outcome> {
        let client = db::client(&self.pool).await?;
        if paused.load(Ordering::Relaxed) || !self.call_fits(deadline) {
            return self
                .carry_out(&client, &job, Turn::NotStarted, false, "")
                .await;
        }
        let Some(prompt) = self.prompts.get(&job.versions.prompt_version) else {
            // A result made by a build that knew the version still answers this job.
            if job.result_exists(&client).await? {
                return dedup_hit(&client, &job).await;
            }
            let error = format!(
                "prompt version {:?} is not in this build",
                job.versions.prompt_version.as_str()
            );
            return self
                .carry_out(&client, &job, Turn::UnknownPrompt, false, &error)
                .await;
        };
        let policy = &self.config.worker;
        let request = EvaluationRequest {
            subject: &job.subject,
            message: &job.message,
            prompt,
            model: &job.versions.model_version,
            policy: &self.policy,
            timeout: policy.call_timeout,
        };

        // The provider's shared rate limit: a slot reserved, slept for with no connection held.
        let tokens = request.estimated_tokens();
        let client = match self.reserve_call(&client, tokens, deadline).await? {
            Take::Reserved { wait } if wait.is_zero() => client,
            Take::Reserved { wait } => {
                drop(client);
                tokio::time::sleep(wait).await;
                db::client(&self.pool).await?
            }
            Take::Full { opens_in } => {
                let turn = Turn::NoBudget { opens_in };
                return self.carry_out(&client, &job, turn, false, "").await;
            }
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
        let result = tokio::time::timeout(
            policy.call_timeout + WRITE_MARGIN,
            self.provider.evaluate(request),
        )
        .await
        .unwrap_or_else(|_| {
            Err(ProviderError::new(
                FailureKind::Timeout,
                "call exceeded its timeout",
            ))
        });
        let latency = started.elapsed();

        let mut client = db::client(&self.pool).await?;
        match result {
            Ok(reply) => {
                self.answered(&client, &job, call, reply, latency, tokens)
                    .await
            }
            Err(error) => {
                // A timed-out request may still have been served and billed.
                let billed = (error.kind != FailureKind::Timeout).then_some(false);
                let record = CallRecord {
                    outcome: CallOutcome::Failed(error.kind),
                    http_status: error.http_status,
                    billed,
                    usage: Default::default(),
                    cost_usd: 0.0,
                    latency,
                };
                ledger::finish_call(&client, call, &record).await?;
                metric::provider_call(latency, (0, 0), 0.0);
                tracing::warn!(reason = error.kind.reason(), error = %error, "provider call failed");
                let class = error.kind.class();
                if class == ErrorClass::RateLimit {
                    self.settle_refusal(&client, tokens, &error).await?;
                }
                let breaker_open = if matches!(class, ErrorClass::Permanent | ErrorClass::RateLimit)
                {
                    // The provider answered: whatever outage there was is over.
                    breaker::record_success(&client, self.provider.name()).await?;
                    false
                } else {
                    let name = self.provider.name();
                    let detail = error.to_string();
                    breaker::record_failure(&mut client, name, error.kind, &detail, policy).await?
                };
                if breaker_open {
                    paused.store(true, Ordering::Relaxed);
                }
                let turn = Turn::Failed {
                    kind: error.kind,
                    retry_after: error.retry_after,
                };
                self.carry_out(&client, &job, turn, breaker_open, &error.to_string())
                    .await
            }
        }
    }

    /// A billed answer: ledger, breaker and the job's write pipelined on one connection (one
    /// round trip, not three).
    async fn answered(
        &self,
        client: &db::Client,
        job: &ClaimedJob,
        call: ledger::CallId,
        reply: ProviderReply,
        latency: Duration,
        tokens: i64,
    ) -> Result<Outcome> {
        let checked = contract::validate(&reply.output, &self.policy);
        let cost_usd = self
            .config
            .provider
            .prices
            .cost(job.versions.model_version.model(), reply.usage);
        let record = CallRecord {
            outcome: match &checked {
                Ok(_) => CallOutcome::Ok,
                Err(_) => CallOutcome::Failed(FailureKind::ContractViolation),
            },
            http_status: Some(reply.http_status),
            billed: Some(true),
            usage: reply.usage,
            cost_usd,
            latency,
        };
        let usage = (reply.usage.input_tokens, reply.usage.output_tokens);
        metric::provider_call(latency, usage, cost_usd);
        let (turn, error) = match &checked {
            Ok(evaluation) => (Turn::Answered(evaluation), String::new()),
            Err(violation) => (
                Turn::Failed {
                    kind: FailureKind::ContractViolation,
                    retry_after: None,
                },
                violation.to_string(),
            ),
        };
        let (_, _, _, outcome) = tokio::try_join!(
            ledger::finish_call(client, call, &record),
            breaker::record_success(client, self.provider.name()),
            self.settle_answer(client, tokens, &reply),
            self.carry_out(client, job, turn, false, &error),
        )?;
        if outcome == Outcome::Evaluated {
            tracing::info!(latency_ms = latency.as_millis() as u64, "evaluated");
        }
        Ok(outcome)
    }

    /// Decides what becomes of the job and writes it through the job's fenced method.
    async fn carry_out(
        &self,
        client: &db::Client,
        job: &ClaimedJob,
        turn: Turn<'_>,
        breaker_open: bool,
        error: &str,
    ) -> Result<Outcome> {
        let decided = disposition(
            turn,
            job.attempts,
            breaker_open,
            &self.config.worker,
            &job.key,
        );
        let (fencing, outcome) = match decided {
            Disposition::Complete(evaluation) => (
                job.complete(client, evaluation, &self.config.versions.policy)
                    .await?,
                Outcome::Evaluated,
            ),
            Disposition::Reschedule { delay, reason } => (
                job.reschedule(client, delay, error, reason).await?,
                Outcome::Rescheduled { reason },
            ),
            Disposition::Release { delay, .. } => {
                let error = (!error.is_empty()).then_some(error);
                (job.release(client, delay, error).await?, Outcome::Released)
            }
            Disposition::DeadLetter { reason } => {
                let error = match reason {
                    "attempts_exhausted" => {
                        format!(
                            "max attempts ({}): {error}",
                            self.config.worker.max_attempts
                        )
                    }
                    _ => error.to_string(),
                };
                (
                    job.dead_letter(client, &error, reason).await?,
                    Outcome::DeadLettered { reason },
                )
            }
        };
        Ok(fenced(fencing, outcome))
    }
}

async fn dedup_hit(client: &db::Client, job: &ClaimedJob) -> Result<Outcome> {
    tracing::info!("result exists: no call");
    Ok(fenced(
        job.complete_from_existing_result(client).await?,
        Outcome::DedupHit,
    ))
}

/// The outcome of a fenced write: what was meant, or [`Outcome::Fenced`] when the lease was
/// lost and nothing was written.
fn fenced(fencing: Fencing, outcome: Outcome) -> Outcome {
    match fencing {
        Fencing::Held => outcome,
        Fencing::Lost => {
            tracing::warn!(
                ?outcome,
                "lease lost: another worker holds the job; nothing written"
            );
            Outcome::Fenced
        }
    }
}
