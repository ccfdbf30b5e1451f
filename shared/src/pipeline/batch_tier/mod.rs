//! The batch tier (`TRIAGE_BULK_TIER=batch`, docs/cost.md): before it claims online work, each
//! worker invocation tends the provider batches, and so does the sweeper's tick, so results
//! are collected while no worker runs. [`BatchTier::collect`] adopts a submission whose sender
//! died between sending and recording (found by the reference the provider echoes, never sent
//! twice), collects the ended ones (each answered line through the same fenced write, ledger
//! row and dedup as an online call, at the batch price; failed, expired and cancelled lines
//! back to the online path: [`lines`]), deletes a collected batch's text at the provider
//! (retried by later ticks until it is gone), and cancels the batches still running once the
//! daily budget is spent. The worker then submits the bulk lane's waiting jobs as a new batch
//! (`worker::batch_submit`), recorded first and no larger than the daily budget allows.

mod lines;

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;

use crate::{
    config::Config,
    db,
    domain::error::{ConfigError, Result},
    pipeline::{
        answering::Policies,
        ledger::CallId,
        limits::budget,
        outbox::{
            submission::{self, Submission},
            ClaimedJob, OutboxId,
        },
        turn::WRITE_MARGIN,
    },
    providers::{Batch, BatchClient, BatchState, FailureKind, LineOutcome, ProviderError, Tier},
};

/// How long one worker has a submission to itself while it polls or collects it.
const POLL_LEASE: Duration = Duration::from_secs(120);

/// The most submissions one tick polls: each is a provider request or more, and an ended one is
/// a line-by-line collection; the next tick takes the rest.
const SUBMISSIONS_PER_TICK: i64 = 20;

/// A provider's batch API with what collecting its lines needs: the pool, the policies their
/// answers are held to and the prompts they were priced by (each line's own).
pub struct BatchTier {
    pool: Pool,
    config: Arc<Config>,
    /// Who the lines' ledger rows name: the worker, or the sweeper, that tends the batches.
    caller: String,
    policies: Arc<Policies>,
    client: BatchClient,
}

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
    /// Closed batches whose text the provider no longer holds.
    pub deleted_at_provider: u32,
}

impl BatchTier {
    /// The configured provider's batch API when `TRIAGE_BULK_TIER=batch`, else `None`. Lines'
    /// ledger rows name `caller`; each line is held to its job's policy in `policies`.
    pub fn new(
        pool: Pool,
        config: Arc<Config>,
        caller: String,
        policies: Arc<Policies>,
    ) -> Result<Option<Self>> {
        if config.worker.bulk_tier != Tier::Batch {
            return Ok(None);
        }
        let (budget_usd, prices) = (config.worker.daily_budget_usd, &config.provider.prices);
        // Lines under a budget are held at their price.
        if let Some(reason) = budget::unpriced(budget_usd, prices, &config.versions.model) {
            return Err(ConfigError::invalid("TRIAGE_PRICES", reason).into());
        }
        let client = BatchClient::from_config(&config.provider, config.worker.call_timeout)
            .map_err(|e| ConfigError::invalid("TRIAGE_PROVIDER_URL", e.detail))?;
        Ok(client.map(|client| Self {
            pool,
            config,
            caller,
            policies,
            client,
        }))
    }

    pub fn client(&self) -> &BatchClient {
        &self.client
    }

    /// What the daily budget holds for a line until its result is costed: its worst case at
    /// the batch price (a line's policy is loaded before its line is started).
    pub fn estimate_usd(&self, job: &ClaimedJob) -> f64 {
        let policies = (&*self.policies, self.config.versions.policy.as_str());
        job.worst_case_usd(policies, &self.config.provider.prices, Tier::Batch)
    }

    /// Polls the open submissions (at most [`SUBMISSIONS_PER_TICK`], each held under its poll
    /// lease so a worker and the sweeper never tend one together), adopts, collects and, with
    /// the budget spent, cancels; stops before `deadline`. Never submits: that claims.
    pub async fn collect(&self, deadline: Instant) -> Result<BatchReport> {
        let mut report = BatchReport::default();
        let batches = &self.client;
        let open = {
            let client = db::client(&self.pool).await?;
            let (provider, sending_for) = (self.client.provider_name(), self.sending_for());
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
                Ok(batch) if open.closed => {
                    // A cancelled batch still ending is looked at again next tick.
                    if batch.state == BatchState::Ended {
                        self.delete_at_provider(batches, &open, &batch, &mut report)
                            .await?;
                    }
                }
                // Gone at the provider already (deleted, or past its retention).
                Err(error) if open.closed && error.http_status == Some(404) => {
                    let client = db::client(&self.pool).await?;
                    submission::deleted_at_provider(&client, open.id).await?;
                    report.deleted_at_provider += 1;
                    continue;
                }
                Ok(batch) if batch.state == BatchState::Ended => {
                    self.collect_ended(batches, &open, &batch, until, &mut report)
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
    pub fn request_time(&self) -> Duration {
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
                for (job, call) in submission::jobs(&transaction, open.id).await? {
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
    async fn collect_ended(
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
        let mut jobs: HashMap<OutboxId, (ClaimedJob, Option<CallId>)> =
            submission::jobs(&client, open.id)
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
        self.delete_at_provider(batches, open, batch, report).await
    }

    /// Deletes a closed batch's text at the provider; one that fails stays recorded as held,
    /// and the next tick tries again (the erasure report names it meanwhile).
    async fn delete_at_provider(
        &self,
        batches: &BatchClient,
        open: &Submission,
        batch: &Batch,
        report: &mut BatchReport,
    ) -> Result<()> {
        match batches.delete(batch).await {
            Ok(()) => {
                let client = db::client(&self.pool).await?;
                submission::deleted_at_provider(&client, open.id).await?;
                report.deleted_at_provider += 1;
            }
            Err(error) => {
                tracing::warn!(%error, batch = %batch.id, "batch text not deleted at the provider: next tick")
            }
        }
        Ok(())
    }
}
