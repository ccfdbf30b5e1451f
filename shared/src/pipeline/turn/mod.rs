//! A claimed job's turn, whoever ran it (a worker's call, a provider batch's line): what
//! becomes of it ([`disposition`], a pure decision) and that decision carried out through
//! the job's fenced writes.

pub mod disposition;

pub use disposition::{disposition, Disposition, Turn};

use std::time::Duration;

use crate::{
    config::Config,
    db,
    domain::error::Result,
    pipeline::outbox::{ClaimedJob, Fencing},
    providers::{ContractViolation, Evaluation},
};

/// Time kept back after a call for its writes: no call starts unless it and its write can
/// finish before the deadline.
pub const WRITE_MARGIN: Duration = Duration::from_secs(1);

/// The turn of a billed answer held to the contract, and the error it records (none for an
/// answer within it).
pub fn of_answer(checked: &Result<Evaluation, ContractViolation>) -> (Turn<'_>, String) {
    match checked {
        Ok(evaluation) => (Turn::Answered(evaluation), String::new()),
        Err(violation) => (
            Turn::Failed {
                kind: violation.kind,
                retry_after: None,
            },
            violation.to_string(),
        ),
    }
}

/// How one job's turn ended, as far as its runner could write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
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
    /// The database stayed away until the lease (or, before a call, the deadline) ran out:
    /// nothing was written, the lease hands the job on.
    Abandoned,
}

/// Decides what becomes of the job and writes it through the job's fenced method.
pub async fn carry_out(
    client: &db::Client,
    job: &ClaimedJob,
    turn: Turn<'_>,
    breaker_open: bool,
    error: &str,
    config: &Config,
) -> Result<Outcome> {
    let decided = disposition(turn, job.attempts, breaker_open, &config.worker, &job.key);
    let (fencing, outcome) = match decided {
        Disposition::Complete(evaluation) => {
            (job.complete(client, evaluation).await?, Outcome::Evaluated)
        }
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
                    format!("max attempts ({}): {error}", config.worker.max_attempts)
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

pub async fn dedup_hit(client: &db::Client, job: &ClaimedJob) -> Result<Outcome> {
    tracing::info!("result exists: no call");
    Ok(fenced(
        job.complete_from_existing_result(client).await?,
        Outcome::DedupHit,
    ))
}

/// The outcome of a fenced write: what was meant, or [`Outcome::Fenced`] when the lease was
/// lost and nothing was written.
pub fn fenced(fencing: Fencing, outcome: Outcome) -> Outcome {
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
