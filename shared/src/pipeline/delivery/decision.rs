//! What becomes of a delivery after an attempt: a pure function of the answer, the attempts
//! and how long its endpoint has been failing (River's `makeRetryDecision`), tested by a
//! table. The deliverer then carries it out with one fenced write.

use std::time::Duration;

use crate::pipeline::limits::backoff::{self, Schedule};

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx: the receiver has it.
    Acknowledged,
    /// Any other status, a redirect (never followed), a timeout, a refused connection.
    Failed(String),
    /// The endpoint may not be called at all (SSRF): retrying cannot help.
    Refused(String),
    /// The receiver refuses this one event for good, and is well otherwise (Zendesk's 422
    /// for a closed or merged ticket): retrying cannot help, nor is the endpoint at fault.
    Rejected(String),
    /// The receiver asked us to wait (a 429's `Retry-After`): retried no earlier.
    Throttled { after: Duration, error: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Delivered,
    Retry {
        after: Duration,
        error: String,
    },
    /// Disable the endpoint (and give up its pending deliveries): `reason` in full for the
    /// operator (the delivery's last error, the log), `shown` for the subscription's owner,
    /// who reads it back and must not learn from it where the service's own network resolves
    /// names (a private address is an oracle for the VPC's DNS).
    Disable {
        reason: String,
        shown: &'static str,
    },
    /// End this delivery (`dead`, `abandoned`, with `reason`); the endpoint stays enabled.
    Abandon {
        reason: String,
    },
}

/// `failing_for`: how long the endpoint has failed without a success, this attempt included
/// (zero for its first failure). `seed` spreads the retries of a herd (the delivery's id).
pub fn decide(
    attempt: Attempt,
    attempts: i32,
    failing_for: Duration,
    retry_window: Duration,
    schedule: &Schedule,
    seed: u32,
) -> Decision {
    match attempt {
        Attempt::Acknowledged => Decision::Delivered,
        Attempt::Refused(why) => Decision::Disable {
            reason: format!("refused: {why}"),
            shown: "refused: the endpoint's address may not be called (private, loopback or \
                    link-local, or not https)",
        },
        Attempt::Rejected(why) => Decision::Abandon { reason: why },
        Attempt::Failed(error) if failing_for >= retry_window => Decision::Disable {
            reason: format!("failing for {}s (last: {error})", failing_for.as_secs()),
            shown: "failing for longer than the retry window",
        },
        Attempt::Failed(error) => Decision::Retry {
            after: backoff::delay(schedule, seed, attempts),
            error,
        },
        Attempt::Throttled { after, error } => Decision::Retry {
            after: after.max(backoff::delay(schedule, seed, attempts)),
            error,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[test]
    fn decisions_by_table() {
        let schedule = Schedule {
            base: Duration::from_secs(5),
            max: Duration::from_secs(3600),
            jitter_max: Duration::ZERO,
        };
        let failed = || Attempt::Failed("503".into());
        let window = 3 * DAY;
        let cases = [
            (Attempt::Acknowledged, 1, 4 * DAY, "delivered"),
            (failed(), 1, Duration::ZERO, "retry 10s"),
            (failed(), 3, DAY, "retry 40s"),
            (failed(), 20, 2 * DAY, "retry 3600s"),
            (failed(), 40, window, "disable"),
            (
                Attempt::Throttled {
                    after: Duration::from_secs(120),
                    error: "429".into(),
                },
                1,
                Duration::ZERO,
                "retry 120s",
            ),
            (
                Attempt::Refused("10.0.0.1".into()),
                1,
                Duration::ZERO,
                "disable",
            ),
            (
                Attempt::Rejected("Status: closed prevents ticket update".into()),
                1,
                Duration::ZERO,
                "abandon",
            ),
        ];
        for (attempt, attempts, failing_for, expected) in cases {
            let got = match decide(attempt, attempts, failing_for, window, &schedule, 0) {
                Decision::Delivered => "delivered".to_string(),
                Decision::Retry { after, .. } => format!("retry {}s", after.as_secs()),
                Decision::Disable { .. } => "disable".to_string(),
                Decision::Abandon { .. } => "abandon".to_string(),
            };
            assert_eq!(
                got, expected,
                "{attempts} attempts, failing {failing_for:?}"
            );
        }
    }
}
