//! A job given back without a call, and what a write the lease outlived comes to (the turn's
//! decision and its fenced writes are `pipeline::turn`'s).

use std::time::Instant;

use super::{
    settle::{settle, Settled},
    Holds, Worker,
};
use crate::{
    domain::error::Result,
    pipeline::{
        outbox::ClaimedJob,
        turn::{carry_out, Outcome, Turn},
    },
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
            |client| async move { carry_out(&client, job, turn, false, error, &self.config).await },
        )
        .await?;
        Ok(abandoned_unless_written(
            settled,
            "no call was made: the lease will return the job",
        ))
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
