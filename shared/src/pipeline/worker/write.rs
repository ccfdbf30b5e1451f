//! What becomes of a job's turn, written: the decision (`disposition`) carried out through the
//! job's fenced writes, a job given back without a call, a dedup hit closed, and what a write
//! the lease outlived or the fence refused comes to.

use std::time::Instant;

use super::{
    disposition,
    settle::{settle, Settled},
    Disposition, Holds, Outcome, Turn, Worker,
};
use crate::{
    db,
    domain::error::Result,
    pipeline::outbox::{ClaimedJob, Fencing},
    providers::Provider,
};

impl<P: Provider> Worker<P> {
    /// A job that gets no call (paused, out of time, database away, no price under a budget)
    /// goes back with its attempt, as `turn` decides and with `error` as its last error; if the
    /// database stays away past the deadline, its lease hands it on.
    pub(super) async fn give_back(
        &self,
        job: &ClaimedJob,
        deadline: Instant,
        holds: &Holds,
        turn: Turn<'_>,
        error: &str,
    ) -> Result<Outcome> {
        let settled = settle(
            &self.pool,
            deadline,
            &holds.database_away,
            |client| async move { self.carry_out(&client, job, turn, false, error).await },
        )
        .await?;
        Ok(abandoned_unless_written(
            settled,
            "no call was made: the lease will return the job",
        ))
    }

    /// Decides what becomes of the job and writes it through the job's fenced method.
    pub(super) async fn carry_out(
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

/// What a settled write came to; a write the database never took leaves the job to its lease.
pub(super) fn abandoned_unless_written(settled: Settled<Outcome>, consequence: &str) -> Outcome {
    match settled {
        Settled::Written(outcome) => outcome,
        Settled::DatabaseAway(error) => {
            tracing::error!(error = %error.report(), consequence, "database away until the lease ran out: nothing written");
            Outcome::Abandoned
        }
    }
}

pub(super) async fn dedup_hit(client: &db::Client, job: &ClaimedJob) -> Result<Outcome> {
    tracing::info!("result exists: no call");
    Ok(fenced(
        job.complete_from_existing_result(client).await?,
        Outcome::DedupHit,
    ))
}

/// The outcome of a fenced write: what was meant, or [`Outcome::Fenced`] when the lease was
/// lost and nothing was written.
pub(super) fn fenced(fencing: Fencing, outcome: Outcome) -> Outcome {
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
