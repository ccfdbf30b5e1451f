//! One claimed job's turn: the dedup check, the ledger row and the slot in the shared rate
//! limit in one statement, one of the invocation's call slots, the call with no pooled
//! connection held, then the ledger, breaker and rate-limit updates and the [`disposition`]
//! carried out by the job's own fenced method, all [`settle`]d so that a database blink does
//! not lose them.

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use tokio::sync::{Semaphore, SemaphorePermit};

use super::{
    settle::{self, settle},
    write::abandoned_unless_written,
    Holds, Worker, WRITE_MARGIN,
};
use crate::{
    db,
    domain::error::Result,
    pipeline::{
        answering::Answering,
        ledger::{self, CallId, CallOutcome, CallRecord, Start, Withdrawal},
        limits::{breaker, budget},
        outbox::{ClaimedJob, Lane},
        turn::{self, carry_out, dedup_hit, Outcome, Turn},
    },
    providers::{
        contract::ContractViolation, ErrorClass, Evaluation, EvaluationRequest, FailureKind,
        Policy, Prompt, Provider, ProviderError, ProviderReply, Tier,
    },
    telemetry::metric,
};

/// Where a job stands once the database has been asked whether to call.
enum Begun<'a> {
    /// Finished without a call (a result exists, or the prompt version is unknown).
    Finished(Outcome),
    /// The call's ledger row, its prompt, the tokens it reserved in the rate limit, and the
    /// invocation's call slot it holds until the call has ended.
    Call(CallId, &'a Prompt, i64, SemaphorePermit<'a>),
}

impl<P: Provider> Worker<P> {
    // The outbox id, never the content key: the key is a hash of the text, so anyone with the
    // logs could confirm a guessed text with it, even after the ticket was erased.
    #[tracing::instrument(
        skip_all,
        fields(outbox_id = job.id.0, attempt = job.attempts)
    )]
    pub(super) async fn process(
        &self,
        job: ClaimedJob,
        deadline: Instant,
        holds: &Holds,
        (calls, grant): (&Semaphore, &budget::Grant),
    ) -> Result<Outcome> {
        if holds.any() || !self.call_fits(deadline) {
            grant.started(job.id);
            return self
                .give_back(&job, deadline, holds, Turn::NotStarted, "")
                .await;
        }
        // The job's own policy, loaded the first time this process meets it; a taxonomy that
        // cannot be loaded is never answered with another one: the job waits for it.
        let answering = match self
            .policies
            .get(&self.pool, job.policy_version.as_str())
            .await
        {
            Ok(Ok(answering)) => answering,
            Ok(Err(unusable)) => {
                grant.started(job.id);
                metric::taxonomy_unusable();
                tracing::error!(error = %unusable, "the job waits for its taxonomy");
                let error = unusable.to_string();
                return self
                    .give_back(&job, deadline, holds, Turn::UnusableTaxonomy, &error)
                    .await;
            }
            Err(error) if error.is_unavailable() => {
                grant.started(job.id);
                return self.back_while_away(&job, deadline, holds).await;
            }
            Err(error) => return Err(error),
        };
        // A cascade's local classifier first: a sure answer needs no call.
        match self.answer_locally(&job, &answering, deadline).await {
            Ok(None) => {}
            Ok(Some(outcome)) => {
                grant.started(job.id);
                return Ok(outcome);
            }
            Err(error) if error.is_unavailable() => {
                grant.started(job.id);
                return self.back_while_away(&job, deadline, holds).await;
            }
            Err(error) => return Err(error),
        }
        // Under a budget, a call whose price is unknown could not be counted: it is not made.
        let (budget, prices) = (
            self.config.worker.daily_budget_usd,
            &self.config.provider.prices,
        );
        if let Some(reason) = budget::unpriced(budget, prices, &job.versions.model_version) {
            grant.started(job.id);
            metric::unpriced();
            tracing::warn!(%reason, "the job waits for its model's price");
            return self
                .give_back(&job, deadline, holds, Turn::Unpriced, &reason)
                .await;
        }
        // A renewal found the job held by another since (this worker stalled past its lease):
        // it is theirs to answer, and nothing is spent on it here.
        if holds.leases.lost(job.id.0) {
            grant.started(job.id);
            return Ok(Outcome::Fenced);
        }
        let begun = self.start(&job, &answering, deadline, holds, calls).await;
        // Its ledger row carries its estimate now, or it has none.
        grant.started(job.id);
        let (call, prompt, tokens, call_slot) = match begun {
            Ok(Begun::Finished(outcome)) => return Ok(outcome),
            Ok(Begun::Call(call, prompt, tokens, call_slot)) => (call, prompt, tokens, call_slot),
            // No call without its ledger row: the job goes back once the database does.
            Err(error) if error.is_unavailable() => {
                return self.back_while_away(&job, deadline, holds).await;
            }
            Err(error) => return Err(error),
        };
        let request = self.request(&job, (prompt, &answering.policy), deadline);
        let started = Instant::now();
        let result = tokio::time::timeout(
            request.timeout + WRITE_MARGIN,
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
        // From here the call is paid for: its writes are retried while the database is away,
        // the job's lease renewed meanwhile (`settle::hold_until`).
        let until = settle::hold_until(deadline, self.config.worker.lease);
        let settled = match result {
            Ok(reply) => {
                // The next call starts while this answer's writes are under way.
                drop(call_slot);
                let (latency_tier, prices) =
                    ((latency, self.tier(&job)), &self.config.provider.prices);
                let policy = &answering.policy;
                let (record, checked) =
                    ledger::billed_answer(&job, &reply, latency_tier, policy, prices);
                let answer = (&reply, tokens, Some(holds));
                settle(&self.pool, until, &holds.database_away, |client| {
                    self.answered(client, &job, call, &record, &checked, answer)
                })
                .await?
            }
            Err(error) => {
                metric::provider_call(latency, (0, 0), 0.0);
                tracing::warn!(reason = error.kind.reason(), error = %error, "provider call failed");
                if error.kind == FailureKind::RequestRejected {
                    metric::request_rejected();
                }
                // A failure keeps its call slot until it is counted: the next call must not
                // start before a breaker it opens or a hold it begins is known.
                let failed = settle(&self.pool, until, &holds.database_away, |client| {
                    self.failed(client, &job, (call, tokens), &error, latency, holds)
                })
                .await?;
                drop(call_slot);
                failed
            }
        };
        let outcome =
            abandoned_unless_written(settled, "the answer is lost: the call will be paid again");
        if outcome == Outcome::Evaluated {
            tracing::info!(latency_ms = latency.as_millis() as u64, "evaluated");
        }
        Ok(outcome)
    }

    /// Before any call, the database went away: the job goes back once it returns, and the
    /// invocation claims no more.
    async fn back_while_away(
        &self,
        job: &ClaimedJob,
        deadline: Instant,
        holds: &Holds,
    ) -> Result<Outcome> {
        holds.database_away.store(true, Ordering::Relaxed);
        self.give_back(job, deadline, holds, Turn::NotStarted, "")
            .await
    }

    /// How `job`'s online call is served: bulk work on flex when that is the bulk tier, the
    /// rest at the standard online price (batch lines are sent by `batch`).
    pub(super) fn tier(&self, job: &ClaimedJob) -> Tier {
        match (job.lane, self.config.worker.bulk_tier) {
            (Lane::Bulk, Tier::Flex) => Tier::Flex,
            _ => Tier::Online,
        }
    }

    /// What the provider is sent for `job`, under its prompt and policy. A flex call may take
    /// flex's longer timeout, as far as the invocation's `deadline` (which the lease outlasts)
    /// leaves room for its write.
    pub(super) fn request<'a>(
        &'a self,
        job: &'a ClaimedJob,
        (prompt, policy): (&'a Prompt, &'a Policy),
        deadline: Instant,
    ) -> EvaluationRequest<'a> {
        let worker = &self.config.worker;
        let tier = self.tier(job);
        let timeout = match tier {
            Tier::Flex => {
                let left = deadline.saturating_duration_since(Instant::now());
                let room = left.saturating_sub(WRITE_MARGIN);
                worker.flex_timeout.min(room).max(worker.call_timeout)
            }
            _ => worker.call_timeout,
        };
        EvaluationRequest {
            subject: &job.subject,
            message: &job.message,
            prompt,
            model: &job.versions.model_version,
            policy,
            timeout,
            tier,
        }
    }

    /// The most `job`'s call may cost (its worst-case input and the output cap, at its model's
    /// price): what the daily budget holds for it from its claim until its usage is known.
    pub(super) fn estimate_usd(&self, job: &ClaimedJob, tier: Tier) -> f64 {
        let policies = (&*self.policies, self.config.versions.policy.as_str());
        job.worst_case_usd(policies, &self.config.provider.prices, tier)
    }

    /// The dedup check, the ledger row of the call about to be made and its slot in the
    /// provider's shared rate limit (slept for with no connection held), then one of the
    /// invocation's call slots. The ledger row is written before the call slot is waited for, so
    /// that its round trip is not between one call's end and the next call's start.
    async fn start<'a>(
        &'a self,
        job: &ClaimedJob,
        answering: &'a Answering,
        deadline: Instant,
        holds: &Holds,
        calls: &'a Semaphore,
    ) -> Result<Begun<'a>> {
        let client = db::client(&self.pool).await?;
        let Some(prompt) = answering.prompt(&job.versions.prompt_version) else {
            // A result made by a build that knew the version still answers this job.
            if job.result_exists(&client).await? {
                return Ok(Begun::Finished(dedup_hit(&client, job).await?));
            }
            let error = format!(
                "prompt version {:?} is not in this build",
                job.versions.prompt_version.as_str()
            );
            let outcome = carry_out(
                &client,
                job,
                Turn::UnknownPrompt,
                false,
                &error,
                &self.config,
            )
            .await?;
            return Ok(Begun::Finished(outcome));
        };
        let policy = &answering.policy;
        let tokens = self
            .request(job, (prompt, policy), deadline)
            .estimated_tokens();
        // Article step 4, the line that saves money, the slot in the shared rate limit (where
        // one applies) and the ledger row, in one statement. The connection goes back to the
        // pool before the call: a slow model must not pin one connection per call in flight.
        let estimate_usd = self.estimate_usd(job, self.tier(job));
        let caller = (self.id.as_str(), self.provider.name());
        let pace = self.limiter.pace();
        let slot = self.slot(&pace, tokens, deadline);
        let (call, wait) =
            match ledger::start_call(&client, job, caller, estimate_usd, slot, self.tier(job))
                .await?
            {
                Start::Evaluated => return Ok(Begun::Finished(dedup_hit(&client, job).await?)),
                Start::Call { call, wait } => (call, wait),
                Start::Full { opens_in } => {
                    let turn = Turn::NoBudget { opens_in };
                    let outcome = carry_out(&client, job, turn, false, "", &self.config).await?;
                    return Ok(Begun::Finished(outcome));
                }
            };
        drop(client);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let (call_slot, waited_for_a_call) = match calls.try_acquire() {
            Ok(call_slot) => (call_slot, false),
            Err(_) => (
                calls.acquire().await.expect("call slots are never closed"),
                true,
            ),
        };
        // Since the job's start the call may have stopped being wanted: the invocation ran out
        // of time or the breaker opened, or (where the shared limit applies and the job
        // waited) another worker's 429 began a hold, the provider's word, which a slot
        // reserved before it does not outrank. A database gone meanwhile does not stop it: its
        // ledger row is written.
        let paused = holds.provider_paused.load(Ordering::Relaxed);
        let unwanted = paused || !self.call_fits(deadline);
        let hold_may_have_begun = slot.is_some() && (!wait.is_zero() || waited_for_a_call);
        if !unwanted && !hold_may_have_begun {
            return Ok(Begun::Call(call, prompt, tokens, call_slot));
        }
        let client = db::client(&self.pool).await?;
        let tokens_secs = pace.token_cost_secs(tokens);
        let name = self.provider.name();
        let turn = match ledger::withdraw(&client, call, name, tokens_secs, unwanted).await? {
            Withdrawal::Kept => return Ok(Begun::Call(call, prompt, tokens, call_slot)),
            Withdrawal::Withdrawn {
                hold: Some(opens_in),
            } => Turn::NoBudget { opens_in },
            Withdrawal::Withdrawn { hold: None } => Turn::NotStarted,
        };
        drop(call_slot);
        let outcome = carry_out(&client, job, turn, false, "", &self.config).await?;
        Ok(Begun::Finished(outcome))
    }

    /// A billed answer: ledger (with the token correction), the rate limit's hold, the breaker
    /// and the job's write pipelined on one connection (one round trip). Each is safe to repeat
    /// after a blink: the ledger's finish applies its corrections only once. Hold and breaker
    /// write nothing in the common case. `holds` is `None` for a batch line: an answer from the
    /// batch API says nothing about the online endpoint, so the breaker is left alone.
    pub(super) async fn answered(
        &self,
        client: db::Client,
        job: &ClaimedJob,
        call: CallId,
        record: &CallRecord,
        checked: &std::result::Result<Evaluation, ContractViolation>,
        (reply, tokens, holds): (&ProviderReply, i64, Option<&Holds>),
    ) -> Result<Outcome> {
        let (turn, error) = turn::of_answer(checked);
        let settlement = self.answer(tokens, reply);
        let correction = self.token_correction_secs(&settlement);
        let breaker = async {
            match holds {
                Some(holds) => self.provider_answered(&client, holds).await,
                None => Ok(()),
            }
        };
        let (_, _, _, outcome) = tokio::try_join!(
            ledger::finish_call(&client, call, record, correction),
            self.hold(&client, &settlement),
            breaker,
            carry_out(&client, job, turn, false, &error, &self.config),
        )?;
        Ok(outcome)
    }

    /// The provider answered: a breaker counting failures (or not closed) is reset; one closed
    /// and clean at the claim, with no failure seen since, needs no statement.
    async fn provider_answered(&self, client: &db::Client, holds: &Holds) -> Result<()> {
        if holds.breaker_counting.load(Ordering::Relaxed) {
            breaker::record_success(client, self.provider.name()).await?;
            holds.breaker_counting.store(false, Ordering::Relaxed);
        }
        Ok(())
    }

    /// A failed call: its ledger row, the breaker's count (a 429 is an answer: the provider is
    /// up) or the rate limit's hold, and the job's disposition.
    async fn failed(
        &self,
        mut client: db::Client,
        job: &ClaimedJob,
        (call, tokens): (CallId, i64),
        error: &ProviderError,
        latency: Duration,
        holds: &Holds,
    ) -> Result<Outcome> {
        // A timed-out request may still have been served and billed: it keeps its reserved
        // estimate as its cost.
        let unknown = error.kind == FailureKind::Timeout;
        let record = CallRecord {
            outcome: CallOutcome::Failed(error.kind),
            http_status: error.http_status,
            billed: (!unknown).then_some(false),
            usage: Default::default(),
            cost_usd: (!unknown).then_some(0.0),
            latency,
        };
        let class = error.kind.class();
        let refusal = match (class, self.tier(job)) {
            (ErrorClass::RateLimit, Tier::Flex) => Some(self.flex_refusal(tokens)),
            (ErrorClass::RateLimit, _) => Some(self.refusal(tokens, error)),
            _ => None,
        };
        let correction = refusal
            .as_ref()
            .map_or(0.0, |settlement| self.token_correction_secs(settlement));
        ledger::finish_call(&client, call, &record, correction).await?;
        if let Some(refusal) = &refusal {
            self.hold(&client, refusal).await?;
        }
        let breaker_open = if matches!(class, ErrorClass::Permanent | ErrorClass::RateLimit) {
            // The provider answered: whatever outage there was is over.
            self.provider_answered(&client, holds).await?;
            false
        } else {
            holds.breaker_counting.store(true, Ordering::Relaxed);
            let name = self.provider.name();
            let detail = error.to_string();
            let policy = &self.config.worker;
            breaker::record_failure(&mut client, name, error.kind, &detail, policy).await?
        };
        if breaker_open {
            holds.provider_paused.store(true, Ordering::Relaxed);
        }
        let turn = Turn::Failed {
            kind: error.kind,
            retry_after: error.retry_after,
        };
        carry_out(
            &client,
            job,
            turn,
            breaker_open,
            &error.to_string(),
            &self.config,
        )
        .await
    }
}
