//! The worker's turn with the batch tier (`pipeline::batch_tier`): the batches collected,
//! then the bulk lane's waiting jobs sent as one provider batch: claimed, recorded, then sent.

use std::time::{Duration, Instant};

use super::Worker;
use crate::{
    db,
    domain::error::Result,
    pipeline::{
        batch_tier::{BatchReport, BatchTier},
        outbox::{
            budgeted::{self, Budgeted},
            claim::{self, Serves},
            submission::{self, BATCH_LEASE},
            ClaimedJob,
        },
        pause::{self, Paused},
        turn::dedup_hit,
    },
    providers::{BatchRequest, EvaluationRequest, FailureKind, Provider, Tier},
};

impl<P: Provider> Worker<P> {
    /// Collects, then submits unless the bulk lane is paused or the worker is `triage eval`'s
    /// own (see the module's header): a worker invocation's turn with the batches; nothing
    /// without a batch tier.
    pub async fn tend_batches(&self, deadline: Instant) -> Result<BatchReport> {
        let paused = pause::paused(&db::client(&self.pool).await?).await?;
        self.tend(deadline, paused).await
    }

    /// [`Self::tend_batches`] with the pause the invocation read at its start.
    pub(super) async fn tend(&self, deadline: Instant, paused: Paused) -> Result<BatchReport> {
        let mut report = self.collect_batches(deadline).await?;
        if let Some(tier) = &self.batches {
            // A paused bulk lane sends nothing new; what was sent is still collected.
            if !self.eval_only && !paused.bulk && Instant::now() + tier.request_time() <= deadline {
                report.submitted += self.submit(tier).await?;
            }
        }
        if report != BatchReport::default() {
            tracing::info!(?report, "batches tended");
        }
        Ok(report)
    }

    /// The batches' polling and collection ([`BatchTier::collect`]); nothing without a batch
    /// tier.
    pub async fn collect_batches(&self, deadline: Instant) -> Result<BatchReport> {
        match &self.batches {
            Some(tier) => tier.collect(deadline).await,
            None => Ok(BatchReport::default()),
        }
    }

    /// Claims the bulk lane's waiting jobs, records the submission, then sends it.
    async fn submit(&self, tier: &BatchTier) -> Result<u32> {
        let batches = tier.client();
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
                    let estimate = |job: &ClaimedJob| tier.estimate_usd(job);
                    match budgeted::keep_affordable(&transaction, budget_usd, jobs, estimate)
                        .await?
                    {
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
            let answering = self
                .policies
                .get(&self.pool, job.policy_version.as_str())
                .await?;
            let known = answering
                .as_ref()
                .is_ok_and(|a| a.prompt(&job.versions.prompt_version).is_some());
            let (true, Ok(answering)) = (known, answering) else {
                // The online path knows what to do with a version this build lacks, or a
                // taxonomy that cannot be loaded.
                let _ = job.fall_back_online(&client, None).await?;
                continue;
            };
            // A cascade's classifier answers what it is sure of: no line for those.
            if self
                .answer_locally(&job, &answering, Instant::now())
                .await?
                .is_some()
            {
                continue;
            }
            match tier.start_line(&client, &job).await? {
                Some(call) => lines.push((job, answering, call)),
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
            .map(|((job, answering, _), custom_id)| {
                let prompt = answering
                    .prompt(&job.versions.prompt_version)
                    .expect("a line's prompt is known");
                BatchRequest {
                    custom_id,
                    request: EvaluationRequest {
                        tier: Tier::Online,
                        ..self.request(job, (prompt, &answering.policy), deadline)
                    },
                }
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
                // Its text is deleted at the provider once the cancelled batch has ended.
                submission::sent_after_abandoned(&client, open.id, &batch.id).await?;
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
                    tier.line_failed(&client, Some(*call), &error).await?;
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
