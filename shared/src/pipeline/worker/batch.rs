//! The batch tier (`TRIAGE_BULK_TIER=batch`, docs/cost.md): before it claims online work, each
//! invocation tends the provider batches. [`Worker::collect_batches`] adopts a submission whose
//! sender died between sending and recording (found by the reference the provider echoes,
//! never sent twice), collects the ended ones (each answered line through the same fenced
//! write, ledger row and dedup as an online call, at the batch price; failed, expired and
//! cancelled lines back to the online path), and cancels the batches still running once the
//! daily budget is spent; the sweeper's tick runs it too, so results are collected while no
//! worker runs. The worker then submits the bulk lane's waiting jobs as a new batch, recorded
//! first and no larger than the daily budget allows.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use deadpool_postgres::GenericClient;
use serde::Serialize;

use super::{write::dedup_hit, Worker, WRITE_MARGIN};
use crate::{
    db,
    domain::error::Result,
    evaluate::{
        Batch, BatchClient, BatchRequest, BatchState, EvaluationRequest, FailureKind, LineOutcome,
        Provider, ProviderError, ProviderReply, Tier,
    },
    pipeline::{
        ledger::{self, CallId, CallOutcome, CallRecord},
        limits::budget::{self, Budgeted},
        outbox::{
            claim::{self, Serves},
            submission::{self, Submission},
            ClaimedJob, OutboxId,
        },
    },
};

/// The lease of a job in a batch: longer than the batch's 24-hour window, so the sweeper never
/// hands a job in a live batch to another worker.
pub const BATCH_LEASE: Duration = Duration::from_secs(25 * 3600);

/// How long one worker has a submission to itself while it polls or collects it.
const POLL_LEASE: Duration = Duration::from_secs(120);

/// The most submissions one tick polls: each is a provider request or more, and an ended one is
/// a line-by-line collection; the next tick takes the rest.
const SUBMISSIONS_PER_TICK: i64 = 20;

/// What tending the batches did in one invocation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BatchReport {
    pub submitted: u32,
    pub adopted: u32,
    pub collected: u32,
    /// Running batches cancelled because the daily budget was spent.
    pub cancelled: u32,
    pub lines_evaluated: u32,
    pub lines_back_online: u32,
}

impl<P: Provider> Worker<P> {
    /// Collects, then submits (see the module's header): a worker invocation's turn with the
    /// batches; nothing without a batch tier.
    pub async fn tend_batches(&self, deadline: Instant) -> Result<BatchReport> {
        let mut report = self.collect_batches(deadline).await?;
        if let Some(batches) = &self.batches {
            if Instant::now() + self.request_time() <= deadline {
                report.submitted += self.submit(batches).await?;
            }
        }
        if report != BatchReport::default() {
            tracing::info!(?report, "batches tended");
        }
        Ok(report)
    }

    /// Polls the open submissions (at most [`SUBMISSIONS_PER_TICK`], each held under its poll
    /// lease so a worker and the sweeper never tend one together), adopts, collects and, with
    /// the budget spent, cancels; stops before `deadline`. Never submits: that claims.
    pub async fn collect_batches(&self, deadline: Instant) -> Result<BatchReport> {
        let mut report = BatchReport::default();
        let Some(batches) = &self.batches else {
            return Ok(report);
        };
        let open = {
            let client = db::client(&self.pool).await?;
            let (provider, sending_for) = (self.provider.name(), self.sending_for());
            submission::take_open(
                &client,
                provider,
                POLL_LEASE,
                sending_for,
                SUBMISSIONS_PER_TICK,
            )
            .await?
        };
        // Every write happens inside the poll lease, and before the caller's deadline.
        let until = deadline.min(Instant::now() + POLL_LEASE - WRITE_MARGIN);
        // A spent budget cancels the batches still running: their lines come back unbilled.
        let cancel = match self.config.worker.daily_budget_usd {
            Some(budget_usd) if !open.is_empty() => {
                let client = db::client(&self.pool).await?;
                budget::spend(&client).await?.spent_today_usd >= budget_usd
            }
            _ => false,
        };
        let mut listed = None;
        for open in open {
            // A poll is a provider request: one that might not end in time is the next tick's.
            if Instant::now() + self.request_time() > until {
                let client = db::client(&self.pool).await?;
                submission::put_back(&client, open.id).await?;
                continue;
            }
            // `continue` skips the put-back: the poll lease then spaces out the next look.
            let batch = match &open.provider_batch_id {
                Some(id) => batches.retrieve(id).await,
                None => match self.adopt(batches, &open, &mut listed).await? {
                    Some(batch) => {
                        report.adopted += 1;
                        Ok(batch)
                    }
                    None => continue,
                },
            };
            match batch {
                Ok(batch) if batch.state == BatchState::Ended => {
                    self.collect(batches, &open, &batch, until, &mut report)
                        .await?;
                }
                Ok(batch) if cancel => {
                    tracing::warn!(batch = %batch.id, "daily budget spent: batch cancelled");
                    if let Err(error) = batches.cancel(&batch.id).await {
                        tracing::warn!(%error, "batch not cancelled");
                    }
                    report.cancelled += 1;
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "batch not polled"),
            }
            let client = db::client(&self.pool).await?;
            submission::put_back(&client, open.id).await?;
        }
        Ok(report)
    }

    /// One provider request and the write of its answer: what a poll or the start of a send
    /// needs left before the deadline (a sender stopped mid-send is adopted like a crash).
    fn request_time(&self) -> Duration {
        self.config.worker.call_timeout + WRITE_MARGIN
    }

    /// A submission still `sending` this long after its send began has lost its sender: a
    /// send is at most two requests (OpenAI's file, then the batch), each within the call's
    /// timeout, and the write of its answer.
    fn sending_for(&self) -> Duration {
        2 * self.config.worker.call_timeout + WRITE_MARGIN
    }

    /// A submission that never got its batch id. The provider's own list says whether the
    /// batch exists: found by its reference, it is adopted; absent, it was never made, and its
    /// jobs go back to the queue. Anthropic's batches carry the reference only in their
    /// results: while one we cannot read yet is running, the decision waits.
    async fn adopt(
        &self,
        batches: &BatchClient,
        open: &Submission,
        listed: &mut Option<Vec<Batch>>,
    ) -> Result<Option<Batch>> {
        if listed.is_none() {
            match batches.list(None, 100).await {
                Ok(found) => *listed = Some(found),
                Err(error) => {
                    tracing::warn!(%error, "batches not listed: adoption waits");
                    return Ok(None);
                }
            }
        }
        let mut undecided = false;
        for batch in listed.iter().flatten() {
            let ours = match &batch.reference {
                Some(reference) => *reference == open.reference,
                None if batch.state == BatchState::Ended => batches
                    .results(batch)
                    .await
                    .ok()
                    .and_then(|lines| lines.first().map(|l| open.job_of(&l.custom_id).is_some()))
                    .unwrap_or(false),
                None => {
                    undecided = true;
                    false
                }
            };
            if ours {
                let client = db::client(&self.pool).await?;
                // `false`: its sender recorded it meanwhile, which is as good.
                let _ = submission::submitted(&client, open.id, &batch.id).await?;
                tracing::warn!(batch = %batch.id, "adopted a batch whose sender died before recording it");
                return Ok(Some(batch.clone()));
            }
        }
        if !undecided {
            // Given up only while still `sending`, and its jobs given back in the same
            // transaction: a sender that recorded its batch meanwhile keeps it (and one that
            // records it after this finds it given up and cancels its batch).
            let mut client = db::client(&self.pool).await?;
            let transaction = client.transaction().await?;
            if submission::close(&transaction, open.id, false).await? {
                let lease_ends = Instant::now() + POLL_LEASE;
                for (job, call) in submission::jobs(&transaction, open.id, lease_ends).await? {
                    let not_sent =
                        ProviderError::new(FailureKind::ConnectFailed, "batch never sent");
                    self.line_failed(&transaction, call, &not_sent).await?;
                    let _ = job.release(&transaction, Duration::ZERO, None).await?;
                }
            }
            transaction.commit().await?;
        }
        Ok(None)
    }

    /// Every line of an ended batch to its job; jobs the provider said nothing about (a batch
    /// that failed whole) go back to the online path like expired lines. Past `until` the rest
    /// waits for the next tick: the lines written are done, and are skipped then.
    async fn collect(
        &self,
        batches: &BatchClient,
        open: &Submission,
        batch: &Batch,
        until: Instant,
        report: &mut BatchReport,
    ) -> Result<()> {
        let lines = match batches.results(batch).await {
            Ok(lines) => lines,
            Err(error) => {
                tracing::warn!(%error, batch = %batch.id, "batch results not read");
                return Ok(());
            }
        };
        let client = db::client(&self.pool).await?;
        let lease_ends = Instant::now() + POLL_LEASE;
        let mut jobs: HashMap<OutboxId, (ClaimedJob, Option<CallId>)> =
            submission::jobs(&client, open.id, lease_ends)
                .await?
                .into_iter()
                .map(|(job, call)| (job.id, (job, call)))
                .collect();
        for line in lines {
            if Instant::now() + WRITE_MARGIN >= until {
                tracing::info!(batch = %batch.id, "batch partly collected: the rest next tick");
                return Ok(());
            }
            let Some((job, call)) = open.job_of(&line.custom_id).and_then(|id| jobs.remove(&id))
            else {
                continue;
            };
            match line.outcome {
                LineOutcome::Answered(reply) => {
                    self.complete_line(&job, call, &reply).await?;
                    report.lines_evaluated += 1;
                }
                LineOutcome::Failed(error) => {
                    self.back_online(&client, &job, call, Some(&error)).await?;
                    report.lines_back_online += 1;
                }
                LineOutcome::NotRun => {
                    self.back_online(&client, &job, call, None).await?;
                    report.lines_back_online += 1;
                }
            }
        }
        for (job, call) in jobs.into_values() {
            self.back_online(&client, &job, call, None).await?;
            report.lines_back_online += 1;
        }
        submission::close(&client, open.id, true).await?;
        report.collected += 1;
        Ok(())
    }

    /// A line's ledger row, costed at the batch price's estimate until its result is in;
    /// `None` when a result for its key exists (article step 4). A batch takes nothing of the
    /// online rate limit, so no slot is asked for.
    async fn start_line(&self, client: &db::Client, job: &ClaimedJob) -> Result<Option<CallId>> {
        let caller = (self.id.as_str(), self.provider.name());
        let estimate_usd = self.estimate_usd(job, Tier::Batch);
        ledger::start_without_slot(client, job, caller, estimate_usd, Tier::Batch).await
    }

    /// An answered line: the contract, the ledger at the batch price, and the job's fenced
    /// write, as for an online answer; not the breaker, which guards the online endpoint.
    async fn complete_line(
        &self,
        job: &ClaimedJob,
        call: Option<CallId>,
        reply: &ProviderReply,
    ) -> Result<()> {
        let client = db::client(&self.pool).await?;
        let call = match call {
            Some(call) => call,
            None => match self.start_line(&client, job).await? {
                Some(call) => call,
                None => {
                    dedup_hit(&client, job).await?;
                    return Ok(());
                }
            },
        };
        let (record, checked) = self.check_answer(job, reply, Duration::ZERO, Tier::Batch);
        // The batch used none of the online rate limit: nothing to correct there.
        let used = reply.usage.input_tokens + reply.usage.output_tokens;
        self.answered(client, job, call, &record, &checked, (reply, used, None))
            .await?;
        Ok(())
    }

    /// A line that brought no answer: its ledger row says why (not billed), and the job goes to
    /// the online path without spending an attempt.
    async fn back_online(
        &self,
        client: &db::Client,
        job: &ClaimedJob,
        call: Option<CallId>,
        error: Option<&ProviderError>,
    ) -> Result<()> {
        match error {
            Some(error) => self.line_failed(client, call, error).await?,
            None => {
                if let Some(call) = call {
                    let record = unbilled(CallOutcome::NotRun, None);
                    ledger::finish_call(client, call, &record, 0.0).await?;
                }
            }
        }
        let detail = error.map(ToString::to_string);
        let detail = detail.as_deref().unwrap_or("batch line not run");
        let _ = job.fall_back_online(client, Some(detail)).await?;
        Ok(())
    }

    async fn line_failed(
        &self,
        client: &impl GenericClient,
        call: Option<CallId>,
        error: &ProviderError,
    ) -> Result<()> {
        if let Some(call) = call {
            let record = unbilled(CallOutcome::Failed(error.kind), error.http_status);
            ledger::finish_call(client, call, &record, 0.0).await?;
        }
        Ok(())
    }

    /// Claims the bulk lane's waiting jobs, records the submission, then sends it.
    async fn submit(&self, batches: &BatchClient) -> Result<u32> {
        let policy = &self.config.worker;
        let serves = Serves::for_model_version(&self.config.versions.model);
        let (worker, provider) = (self.id.as_str(), self.provider.name());
        let (open, jobs) = {
            let mut client = db::client(&self.pool).await?;
            let transaction = client.transaction().await?;
            let lines = policy.batch_max_lines;
            let jobs =
                claim::claim_for_batch(&transaction, worker, lines, BATCH_LEASE, serves).await?;
            // A batch's lines stay `processing` until their results are costed: the budget
            // holds each at its estimate, like a call under way. Without a commit, the claim
            // rolls back.
            let jobs = match policy.daily_budget_usd {
                None => jobs,
                Some(budget_usd) => {
                    let estimate = |job: &ClaimedJob| self.estimate_usd(job, Tier::Batch);
                    match budget::keep_affordable(&transaction, budget_usd, jobs, estimate).await? {
                        (Budgeted::Claimed { jobs, .. }, returned) => {
                            claim::unclaim(&transaction, &returned).await?;
                            jobs
                        }
                        (Budgeted::Wait | Budgeted::Exhausted, _) => return Ok(0),
                    }
                }
            };
            if jobs.is_empty() {
                return Ok(0);
            }
            let open = submission::record(&transaction, provider, worker, &jobs).await?;
            transaction.commit().await?;
            (open, jobs)
        };
        let client = db::client(&self.pool).await?;
        let mut lines = Vec::new();
        for job in jobs {
            let Some(prompt) = self.prompts.get(&job.versions.prompt_version) else {
                // The online path knows what to do with a version this build lacks.
                let _ = job.fall_back_online(&client, None).await?;
                continue;
            };
            match self.start_line(&client, &job).await? {
                Some(call) => lines.push((job, prompt, call)),
                None => {
                    dedup_hit(&client, &job).await?;
                }
            }
        }
        if lines.is_empty() {
            submission::close(&client, open.id, false).await?;
            return Ok(0);
        }
        let deadline = Instant::now() + BATCH_LEASE;
        let ids: Vec<String> = lines
            .iter()
            .map(|(job, ..)| open.custom_id(job.id))
            .collect();
        let requests: Vec<BatchRequest> = lines
            .iter()
            .zip(&ids)
            .map(|((job, prompt, _), custom_id)| BatchRequest {
                custom_id,
                request: EvaluationRequest {
                    tier: Tier::Online,
                    ..self.request(job, prompt, deadline)
                },
            })
            .collect();
        submission::send_started(&client, open.id).await?;
        match batches.submit(&open.reference, &requests).await {
            Ok(batch) if !submission::submitted(&client, open.id, &batch.id).await? => {
                // Given up as never sent while it was on its way: its jobs are queued again.
                tracing::warn!(batch = %batch.id, "batch sent after its submission was given up: cancelled");
                if let Err(error) = batches.cancel(&batch.id).await {
                    tracing::error!(%error, batch = %batch.id, "a given-up batch not cancelled: it may be billed twice");
                }
                Ok(0)
            }
            Ok(batch) => {
                tracing::info!(batch = %batch.id, lines = lines.len(), "batch submitted");
                Ok(1)
            }
            // No answer may still hide a batch the provider made: the next tick looks for it
            // by its reference before anything is sent again.
            Err(error)
                if matches!(
                    error.kind,
                    FailureKind::Timeout | FailureKind::ConnectionReset
                ) =>
            {
                tracing::warn!(%error, "batch sent without an answer: adopted or given back next tick");
                Ok(0)
            }
            Err(error) => {
                tracing::warn!(%error, "batch refused: its jobs go back to the queue");
                for (job, _, call) in &lines {
                    self.line_failed(&client, Some(*call), &error).await?;
                    let _ = job
                        .release(&client, Duration::ZERO, Some(&error.to_string()))
                        .await?;
                }
                submission::close(&client, open.id, false).await?;
                Ok(0)
            }
        }
    }
}

fn unbilled(outcome: CallOutcome, http_status: Option<u16>) -> CallRecord {
    CallRecord {
        outcome,
        http_status,
        billed: Some(false),
        usage: Default::default(),
        cost_usd: Some(0.0),
        latency: Duration::ZERO,
    }
}
