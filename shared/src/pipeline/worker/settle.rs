//! A result in hand survives a database blink: the writes that end a job's turn are retried
//! with backoff while the database is unreachable, for as long as [`hold_until`] says (fencing
//! still decides who may write). Giving up earlier would throw away a paid answer, and the
//! job would be evaluated and paid again once its lease expired.
//!
//! [`next_try`] is the pure decision, tested by a table; [`settle`] carries it out.

use std::{
    future::Future,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use deadpool_postgres::Pool;

use crate::{
    db,
    domain::error::{Error, Result},
};

/// The first pause after a failed write; it doubles up to [`MAX_PAUSE`]. Short, because a
/// restarted server accepts connections again within seconds; capped, so a failover of a
/// minute or two is noticed within a couple of seconds of its end.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// How long a result in hand waits for the database: to the invocation's end, and at least one
/// lease. The job's lease is renewed meanwhile (`outbox::renewal`), and a lease cannot expire
/// while the server restarts (it runs again from the server's start), so the write goes
/// through once the database is back; only a database that stays up but out of this worker's
/// reach for longer than the lease hands the job on (docs/fencing.md).
pub fn hold_until(deadline: Instant, lease: Duration) -> Instant {
    deadline.max(Instant::now() + lease)
}

/// What to do after a write failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextTry {
    /// Try again after this pause.
    After(Duration),
    /// The database is away past `until`, or the failure is not about reaching it.
    GiveUp,
}

/// Retry only what an outage explains (a refused, closed or timed-out connection), and only
/// while the next try still starts before `until`.
pub fn next_try(unavailable: bool, failures: u32, now: Instant, until: Instant) -> NextTry {
    if !unavailable {
        return NextTry::GiveUp;
    }
    let pause = FIRST_PAUSE
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(MAX_PAUSE);
    if now + pause < until {
        NextTry::After(pause)
    } else {
        NextTry::GiveUp
    }
}

/// How a settled write ended.
#[derive(Debug)]
pub enum Settled<T> {
    Written(T),
    /// The database stayed away until `until`: nothing was written.
    DatabaseAway(Error),
}

/// Runs `write` on a pooled connection, again on a fresh one after every failure an outage
/// explains, until it succeeds or `until` comes. `database_away` is set while writes fail, so
/// the invocation claims nothing and starts no call meanwhile; it is cleared by a success.
/// Any other error is returned as it is.
pub async fn settle<T, F, Fut>(
    pool: &Pool,
    until: Instant,
    database_away: &AtomicBool,
    mut write: F,
) -> Result<Settled<T>>
where
    F: FnMut(db::Client) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut failures = 0;
    loop {
        let attempt = match db::client(pool).await {
            Ok(client) => write(client).await,
            Err(error) => Err(error),
        };
        let error = match attempt {
            Ok(written) => {
                if failures > 0 {
                    tracing::info!(failures, "database back: the write went through");
                }
                database_away.store(false, Ordering::Relaxed);
                return Ok(Settled::Written(written));
            }
            Err(error) => error,
        };
        failures += 1;
        let unavailable = error.is_unavailable();
        if unavailable {
            database_away.store(true, Ordering::Relaxed);
        }
        match next_try(unavailable, failures, Instant::now(), until) {
            NextTry::After(pause) => {
                tracing::warn!(failures, error = %error.report(), "database unavailable: write retried");
                tokio::time::sleep(pause).await;
            }
            NextTry::GiveUp if unavailable => return Ok(Settled::DatabaseAway(error)),
            NextTry::GiveUp => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_retried_with_doubling_pauses_until_the_lease_would_run_out() {
        let now = Instant::now();
        let lease_ends = now + Duration::from_secs(10);
        let ms = |n| NextTry::After(Duration::from_millis(n));
        // (failures so far, expected)
        let table = [
            (1, ms(100)),
            (2, ms(200)),
            (3, ms(400)),
            (5, ms(1600)),
            (6, ms(2000)),
            (60, ms(2000)),
        ];
        for (failures, expected) in table {
            assert_eq!(
                next_try(true, failures, now, lease_ends),
                expected,
                "{failures}"
            );
        }
        let almost_over = lease_ends - Duration::from_millis(150);
        assert_eq!(next_try(true, 1, almost_over, lease_ends), ms(100));
        assert_eq!(next_try(true, 2, almost_over, lease_ends), NextTry::GiveUp);
        assert_eq!(next_try(true, 1, lease_ends, lease_ends), NextTry::GiveUp);
    }

    #[test]
    fn a_failure_an_outage_does_not_explain_is_never_retried() {
        let now = Instant::now();
        let later = now + Duration::from_secs(300);
        assert_eq!(next_try(false, 1, now, later), NextTry::GiveUp);
    }
}
