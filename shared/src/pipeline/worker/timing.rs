//! Whether the worker's times fit inside each other: an invocation > one call plus its write.
//! The lease no longer has to outlast either: the invocation renews it while it holds a job
//! (`outbox::renewal`). Pure checks, tested by tables; a configuration that cannot evaluate
//! anything is refused with the setting to change named, never run as an empty success.

use std::time::Duration;

use crate::{config::WorkerPolicy, domain::error::ConfigError};

pub use crate::pipeline::turn::WRITE_MARGIN;

/// At start: an invocation (`TRIAGE_INVOCATION_SECONDS`, the CLI's budget and Lambda's
/// fallback) fits at least one call and its write.
pub fn check_policy(policy: &WorkerPolicy) -> Result<(), ConfigError> {
    let call = policy.call_timeout + WRITE_MARGIN;
    if policy.invocation_budget <= call {
        return Err(ConfigError::invalid(
            "TRIAGE_INVOCATION_SECONDS",
            format!(
                "an invocation of {:?} cannot fit one call and its write ({:?} TRIAGE_CALL_TIMEOUT_SECONDS + {WRITE_MARGIN:?}): raise it or lower TRIAGE_CALL_TIMEOUT_SECONDS",
                policy.invocation_budget, policy.call_timeout
            ),
        ));
    }
    Ok(())
}

/// Per invocation, on the time actually left (Lambda: until the function's timeout): it must
/// fit one call and its write.
pub fn check_time_left(left: Duration, policy: &WorkerPolicy) -> Result<(), ConfigError> {
    let call = policy.call_timeout + WRITE_MARGIN;
    if left < call {
        return Err(ConfigError::invalid(
            "TRIAGE_CALL_TIMEOUT_SECONDS",
            format!(
                "one call and its write ({:?} + {WRITE_MARGIN:?}) do not fit in the {left:?} this invocation has: raise the function timeout or lower TRIAGE_CALL_TIMEOUT_SECONDS",
                policy.call_timeout
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(lease: u64, invocation: f64, call: f64) -> WorkerPolicy {
        WorkerPolicy {
            lease: Duration::from_secs(lease),
            invocation_budget: Duration::from_secs_f64(invocation),
            call_timeout: Duration::from_secs_f64(call),
            ..WorkerPolicy::default()
        }
    }

    #[test]
    fn the_policy_is_refused_naming_the_setting_that_does_not_fit() {
        // (lease, invocation, call, the setting named or None when accepted)
        let table = [
            (300, 60.0, 30.0, None),
            (300, 2.0, 0.5, None),
            (300, 2.0, 1.5, Some("TRIAGE_INVOCATION_SECONDS")),
            (300, 31.0, 30.0, Some("TRIAGE_INVOCATION_SECONDS")),
            // A lease shorter than the invocation is renewed while a job is held.
            (15, 60.0, 30.0, None),
            (10, 5.0, 2.0, None),
        ];
        for (lease, invocation, call, named) in table {
            let checked = check_policy(&policy(lease, invocation, call));
            assert_eq!(
                checked.err().map(|e| e.name),
                named.map(String::from),
                "lease {lease}, invocation {invocation}, call {call}"
            );
        }
    }

    #[test]
    fn the_time_left_must_fit_one_call() {
        let policy = policy(300, 60.0, 30.0);
        let secs = Duration::from_secs;
        let table = [
            (secs(120), None),
            (secs(31), None),
            (secs(30), Some("TRIAGE_CALL_TIMEOUT_SECONDS")),
            (Duration::ZERO, Some("TRIAGE_CALL_TIMEOUT_SECONDS")),
            (secs(900), None),
        ];
        for (left, named) in table {
            let checked = check_time_left(left, &policy);
            assert_eq!(
                checked.err().map(|e| e.name),
                named.map(String::from),
                "{left:?}"
            );
        }
    }

    #[test]
    fn a_refused_call_timeout_names_the_function_timeout_too() {
        let error = check_time_left(Duration::from_secs(3), &policy(300, 60.0, 30.0)).unwrap_err();
        assert!(error.reason.contains("function timeout"), "{error}");
    }
}
