//! What becomes of a claimed job after its turn: a pure decision over the error table, the
//! attempt count, the breaker, the shared rate limit and the policy (River's
//! `makeRetryDecision`); [`super::carry_out`] writes it with one fenced write. Tested by tables below, with no database.

use std::time::Duration;

use crate::{
    config::WorkerPolicy,
    domain::key::IdempotencyKey,
    pipeline::limits::{backoff, rate_limit},
    providers::{ErrorClass, Evaluation, FailureKind},
};

/// How a claimed job's turn went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Turn<'a> {
    /// The model answered within the contract.
    Answered(&'a Evaluation),
    /// The call failed (a contract violation included).
    Failed {
        kind: FailureKind,
        retry_after: Option<Duration>,
    },
    /// No call was started: claiming is paused, or no call fits before the deadline.
    NotStarted,
    /// No call was started: the shared rate limit has no slot before the deadline; it opens
    /// in about `opens_in`.
    NoBudget { opens_in: Duration },
    /// This build does not know the job's prompt version, and no result answers it.
    UnknownPrompt,
    /// The job's cascade names a local classifier that is not stored (`triage train` makes
    /// it); redriven once it is.
    UnknownLocalModel,
    /// No call was started: a daily budget is set and the job's model has no price, so its
    /// spend could not be counted. It waits for one (TRIAGE_PRICES), its attempt given back.
    Unpriced,
    /// No call was started: the job's taxonomy is not stored, or does not read back as its
    /// version (never answered under another policy). It waits, its attempt given back, and
    /// `outbox.taxonomy_unusable` alarms.
    UnusableTaxonomy,
}

/// How long a job whose model has no price waits before it is looked at again.
pub const UNPRICED_WAIT: Duration = Duration::from_secs(300);
/// How long a job whose taxonomy cannot be loaded waits before it is looked at again.
pub const UNUSABLE_TAXONOMY_WAIT: Duration = Duration::from_secs(60);

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Disposition<'a> {
    /// Store the result and close the job.
    Complete(&'a Evaluation),
    /// Back to the queue after `delay`; the attempt is spent.
    Reschedule {
        delay: Duration,
        reason: &'static str,
    },
    /// Back to the queue after `delay`, the attempt given back; `pause` stops this
    /// invocation's claiming (the provider as a whole is failing).
    Release {
        pause: bool,
        delay: Duration,
    },
    DeadLetter {
        reason: &'static str,
    },
}

/// The error table in action (docs/errors.md): permanent → dead letter; provider-wide, or an
/// outage seen across items (the breaker open) → release and pause; a rate limit → release
/// until the fleet-wide hold ends (never an attempt spent, so never a dead letter);
/// transient → backoff or, at the maximum, dead letter.
pub fn disposition<'a>(
    turn: Turn<'a>,
    attempts: i32,
    breaker_open: bool,
    policy: &WorkerPolicy,
    key: &IdempotencyKey,
) -> Disposition<'a> {
    let (kind, retry_after) = match turn {
        Turn::Answered(evaluation) => return Disposition::Complete(evaluation),
        Turn::NotStarted => return release(false, Duration::ZERO),
        Turn::NoBudget { opens_in } => return release(false, opens_in),
        Turn::Unpriced => return release(false, UNPRICED_WAIT),
        Turn::UnusableTaxonomy => return release(false, UNUSABLE_TAXONOMY_WAIT),
        Turn::UnknownPrompt => {
            return Disposition::DeadLetter {
                reason: "unknown_prompt_version",
            }
        }
        Turn::UnknownLocalModel => {
            return Disposition::DeadLetter {
                reason: "unknown_local_model",
            }
        }
        Turn::Failed { kind, retry_after } => (kind, retry_after),
    };
    match kind.class() {
        ErrorClass::Permanent => Disposition::DeadLetter {
            reason: kind.reason(),
        },
        ErrorClass::ProviderWide => release(true, Duration::ZERO),
        ErrorClass::RateLimit => release(false, rate_limit::hold_after_refusal(retry_after)),
        ErrorClass::Transient if breaker_open => release(true, Duration::ZERO),
        ErrorClass::Transient if attempts >= policy.max_attempts => Disposition::DeadLetter {
            reason: "attempts_exhausted",
        },
        ErrorClass::Transient => Disposition::Reschedule {
            delay: backoff::retry_delay(policy, key, attempts, retry_after),
            reason: kind.reason(),
        },
    }
}

fn release(pause: bool, delay: Duration) -> Disposition<'static> {
    Disposition::Release { pause, delay }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FailureKind::*;

    /// Jitter seed 7: a jitter of 7 s under the article's policy.
    fn key() -> IdempotencyKey {
        IdempotencyKey::example()
    }

    fn failed(kind: FailureKind, attempts: i32, breaker_open: bool) -> Disposition<'static> {
        let turn = Turn::Failed {
            kind,
            retry_after: None,
        };
        disposition(
            turn,
            attempts,
            breaker_open,
            &WorkerPolicy::default(),
            &key(),
        )
    }

    fn reschedule(secs: u64, reason: &'static str) -> Disposition<'static> {
        Disposition::Reschedule {
            delay: Duration::from_secs(secs),
            reason,
        }
    }

    const PAUSE: Disposition<'static> = Disposition::Release {
        pause: true,
        delay: Duration::ZERO,
    };

    /// Released until the shared rate limit's hold ends, the attempt given back.
    fn held(secs: u64) -> Disposition<'static> {
        Disposition::Release {
            pause: false,
            delay: Duration::from_secs(secs),
        }
    }

    #[test]
    fn every_failure_kind_has_its_disposition_from_the_error_table() {
        // (kind, attempts, breaker open after recording it, expected)
        let table = [
            (Timeout, 1, false, reschedule(2 + 7, "timeout")),
            (ServerError, 2, false, reschedule(4 + 7, "server_error")),
            (
                ConnectionReset,
                3,
                false,
                reschedule(8 + 7, "connection_reset"),
            ),
            (RateLimited, 1, false, held(1)),
            (RateLimited, 5, false, held(1)),
            (
                InvalidRequest,
                1,
                false,
                Disposition::DeadLetter {
                    reason: "invalid_request",
                },
            ),
            (
                ContextLength,
                1,
                false,
                Disposition::DeadLetter {
                    reason: "context_length",
                },
            ),
            (
                ContentPolicy,
                1,
                false,
                Disposition::DeadLetter {
                    reason: "content_policy",
                },
            ),
            (
                ContractViolation,
                1,
                false,
                Disposition::DeadLetter {
                    reason: "contract_violation",
                },
            ),
            (
                OutputTruncated,
                1,
                false,
                Disposition::DeadLetter {
                    reason: "output_truncated",
                },
            ),
            (Unauthorized, 1, true, PAUSE),
            (ModelNotFound, 1, true, PAUSE),
            (RequestRejected, 1, true, PAUSE),
            (ConnectFailed, 5, true, PAUSE),
            (QuotaExhausted, 5, true, PAUSE),
        ];
        for (kind, attempts, open, expected) in table {
            assert_eq!(failed(kind, attempts, open), expected, "{kind:?}");
        }
    }

    #[test]
    fn transient_failures_dead_letter_only_at_the_maximum_and_never_while_paused() {
        let max = WorkerPolicy::default().max_attempts;
        for kind in [Timeout, ServerError, ConnectionReset] {
            assert!(matches!(
                failed(kind, max - 1, false),
                Disposition::Reschedule { .. }
            ));
            assert_eq!(
                failed(kind, max, false),
                Disposition::DeadLetter {
                    reason: "attempts_exhausted"
                }
            );
            // An outage seen across items gives the attempt back, however many were spent.
            assert_eq!(failed(kind, max, true), PAUSE, "{kind:?}");
        }
    }

    #[test]
    fn permanent_failures_dead_letter_even_while_the_breaker_is_open() {
        for kind in [
            InvalidRequest,
            ContextLength,
            ContentPolicy,
            ContractViolation,
        ] {
            assert!(matches!(
                failed(kind, 1, true),
                Disposition::DeadLetter { .. }
            ));
        }
    }

    #[test]
    fn retry_after_is_the_earliest_next_attempt() {
        let turn = Turn::Failed {
            kind: ServerError,
            retry_after: Some(Duration::from_secs(120)),
        };
        let d = disposition(turn, 1, false, &WorkerPolicy::default(), &key());
        assert_eq!(d, reschedule(120, "server_error"));
    }

    #[test]
    fn a_rate_limit_of_any_length_gives_the_attempt_back_and_never_dead_letters() {
        let policy = WorkerPolicy::default();
        for attempts in [1, policy.max_attempts, policy.max_attempts + 10] {
            for (retry_after, expected) in [(None, held(1)), (Some(20), held(20))] {
                let turn = Turn::Failed {
                    kind: RateLimited,
                    retry_after: retry_after.map(Duration::from_secs),
                };
                for breaker_open in [false, true] {
                    let d = disposition(turn, attempts, breaker_open, &policy, &key());
                    assert_eq!(
                        d, expected,
                        "attempt {attempts}, breaker open {breaker_open}"
                    );
                }
            }
        }
    }

    #[test]
    fn turns_without_a_failure() {
        let evaluation = Evaluation {
            is_urgent: 1.0,
            department: "billing".into(),
            urgency_score: 0.9,
            answered_by: crate::providers::AnsweredBy::Model,
        };
        let policy = WorkerPolicy::default();
        let decide = |turn| disposition(turn, 1, false, &policy, &key());
        assert_eq!(
            decide(Turn::Answered(&evaluation)),
            Disposition::Complete(&evaluation)
        );
        assert_eq!(decide(Turn::NotStarted), held(0));
        assert_eq!(
            decide(Turn::Unpriced),
            held(UNPRICED_WAIT.as_secs()),
            "no price under a budget: it waits, attempt given back"
        );
        assert_eq!(
            decide(Turn::UnusableTaxonomy),
            held(UNUSABLE_TAXONOMY_WAIT.as_secs()),
            "a taxonomy that cannot be loaded: it waits, attempt given back"
        );
        assert_eq!(
            decide(Turn::NoBudget {
                opens_in: Duration::from_secs(3)
            }),
            held(3),
            "no slot before the deadline: back until the budget opens, attempt given back"
        );
        assert_eq!(
            decide(Turn::UnknownPrompt),
            Disposition::DeadLetter {
                reason: "unknown_prompt_version"
            }
        );
        assert_eq!(
            decide(Turn::UnknownLocalModel),
            Disposition::DeadLetter {
                reason: "unknown_local_model"
            }
        );
    }
}
