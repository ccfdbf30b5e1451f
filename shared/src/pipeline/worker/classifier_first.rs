//! A cascade's first stage in the worker: the local classifier answers a job when it is sure
//! enough (its confidence at least the cascade's threshold). That answer is stored like any
//! other (`answered_by: local`) with no call: no ledger row, no slot in the rate limit, nothing
//! reserved from the budget. Otherwise the job goes on to the large model. And when the
//! large model cannot be asked (its breaker open, the budget spent), new tickets get the
//! local answer as provisional (`pipeline::cascade::provisional`). A share of the sure answers
//! is drawn for the audit and goes to the large model all the same (`cascade::audit`); a
//! suspended cascade's classifier answers nothing (`cascade::suspension`).

use std::time::{Duration, Instant};

use super::{Report, Worker};
use crate::{
    db,
    domain::{error::Result, versions::Threshold},
    pipeline::{
        answering::Answering,
        cascade::{self, audit, models, provisional, targets},
        outbox::ClaimedJob,
        turn::{carry_out, Outcome, Turn},
    },
    providers::Provider,
    telemetry::metric,
};

impl<P: Provider> Worker<P> {
    /// `Some` when the job's turn ended here: answered locally, or dead-lettered for a
    /// classifier that is not stored. `None` for a version that is no cascade, or an answer
    /// below the threshold.
    pub(super) async fn answer_locally(
        &self,
        job: &ClaimedJob,
        answering: &Answering,
        deadline: Instant,
    ) -> Result<Option<Outcome>> {
        let Some(cascade) = job.versions.model_version.cascade() else {
            return Ok(None);
        };
        if self.suspended.holds(job.versions.model_version.as_str()) {
            return Ok(None);
        }
        // A prompt this build does not know is `start`'s to settle.
        let Some(prompt) = answering.prompt(&job.versions.prompt_version) else {
            return Ok(None);
        };
        let client = db::client(&self.pool).await?;
        let Some(model) = models::load(&client, &cascade.local).await? else {
            let error = format!("{} is not stored (triage train makes it)", cascade.local);
            let outcome = carry_out(
                &client,
                job,
                Turn::UnknownLocalModel,
                false,
                &error,
                &self.config,
            )
            .await?;
            return Ok(Some(outcome));
        };
        // A target's thresholds are read once per process (`targets`); none derived (the
        // cascade was refused where it was named): the large model answers.
        let derived = match cascade.threshold {
            Threshold::Confidence(_) => None,
            Threshold::Target(p) => targets::load(&client, &cascade.local, p).await?,
        };
        let request = self.request(job, (prompt, &answering.policy), deadline);
        let started = Instant::now();
        let answer = cascade::ask(model, request).await;
        let sure = answer.as_ref().is_some_and(|answer| {
            let department = answer.evaluation.department.as_str();
            match (cascade.threshold, &derived) {
                (Threshold::Confidence(threshold), _) => answer.confidence >= threshold,
                (Threshold::Target(_), Some(derived)) => {
                    derived.answers(department, answer.confidence)
                }
                (Threshold::Target(_), None) => false,
            }
        });
        let Some(answer) = answer.filter(|_| sure) else {
            metric::local_answer(started.elapsed(), false);
            return Ok(None);
        };
        let urgent = answer.evaluation.is_urgent >= answering.policy.urgent_threshold;
        let share = self.config.audit.share;
        if audit::audited(&client, job, (&answer, urgent), share).await? {
            metric::audit_drawn();
            metric::local_answer(started.elapsed(), false);
            return Ok(None);
        }
        metric::local_answer(started.elapsed(), true);
        let turn = Turn::Answered(&answer.evaluation);
        Ok(Some(
            carry_out(&client, job, turn, false, "", &self.config).await?,
        ))
    }

    /// After an invocation whose claim stopped at an open breaker or a spent budget: the
    /// configured cascade's new tickets get the local answer as provisional, at once. Counted
    /// in `report`; a failure only delays them to the next invocation or the sweeper's tick.
    pub(super) async fn give_provisional(&self, report: &mut Report) {
        let reason = match (report.paused, report.budget_exhausted) {
            _ if self.eval_only => return,
            (true, _) => provisional::Reason::BreakerOpen,
            (false, true) => provisional::Reason::BudgetSpent,
            (false, false) => return,
        };
        let versions = &self.config.versions;
        match provisional::give(&self.pool, versions, reason, Duration::ZERO).await {
            Ok(given) => report.provisional += given as u32,
            Err(error) => {
                tracing::warn!(error = %error.report(), "provisional answers not given: they wait")
            }
        }
    }
}
