//! The retry schedule (article, SPEC rule 7): `min(base·2^attempts, max)` plus a jitter derived
//! from the key (`int(key[:4], 16) % 30`), so a herd that failed together comes back spread,
//! and the same item always comes back at the same offset (explainable, reproducible).
//! With the defaults (base 1 s, max 300 s, jitter 30 s) this is the article's formula exactly;
//! tests shrink the base and jitter to milliseconds through configuration.

use std::time::Duration;

use crate::{config::WorkerPolicy, domain::key::IdempotencyKey};

/// The article's jitter modulus.
const JITTER_SLOTS: u32 = 30;

/// An exponential schedule with a seeded jitter. Evaluations and deliveries each have one
/// (`WorkerPolicy`, `DeliveryPolicy`); the shape is the article's for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub base: Duration,
    pub max: Duration,
    pub jitter_max: Duration,
}

/// `min(base·2^attempts, max)` plus `seed % 30` thirtieths of the jitter.
pub fn delay(schedule: &Schedule, seed: u32, attempts: i32) -> Duration {
    let exponent = attempts.clamp(0, 30) as u32;
    let base = schedule
        .base
        .saturating_mul(1u32 << exponent)
        .min(schedule.max);
    let jitter = schedule
        .jitter_max
        .mul_f64(f64::from(seed % JITTER_SLOTS) / f64::from(JITTER_SLOTS));
    base + jitter
}

pub fn retry_delay(
    policy: &WorkerPolicy,
    key: &IdempotencyKey,
    attempts: i32,
    retry_after: Option<Duration>,
) -> Duration {
    let schedule = Schedule {
        base: policy.backoff_base,
        max: policy.backoff_max,
        jitter_max: policy.jitter_max,
    };
    let delay = delay(&schedule, key.jitter_seed(), attempts);
    // `Retry-After` is the earliest next attempt, never a reason to come back sooner.
    retry_after.map_or(delay, |after| delay.max(after))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jitter seed 7: a jitter of 7 s under the article's policy.
    fn key() -> IdempotencyKey {
        IdempotencyKey::example()
    }

    #[test]
    fn default_policy_is_the_articles_formula() {
        let policy = WorkerPolicy::default();
        let secs = |attempts| retry_delay(&policy, &key(), attempts, None).as_secs_f64();
        assert_eq!(secs(1), 2.0 + 7.0);
        assert_eq!(secs(3), 8.0 + 7.0);
        assert_eq!(secs(8), 256.0 + 7.0);
        assert_eq!(secs(9), 300.0 + 7.0, "capped at 300 s before the jitter");
        assert_eq!(secs(40), 300.0 + 7.0);
    }

    #[test]
    fn retry_after_is_the_earliest_next_attempt() {
        let policy = WorkerPolicy::default();
        assert_eq!(
            retry_delay(&policy, &key(), 1, Some(Duration::from_secs(120))),
            Duration::from_secs(120)
        );
        assert_eq!(
            retry_delay(&policy, &key(), 1, Some(Duration::from_secs(1))),
            Duration::from_secs(9)
        );
    }

    #[test]
    fn scaled_policy_keeps_the_shape() {
        let policy = WorkerPolicy {
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_millis(100),
            jitter_max: Duration::from_millis(30),
            ..WorkerPolicy::default()
        };
        assert_eq!(
            retry_delay(&policy, &key(), 2, None),
            Duration::from_millis(40 + 7)
        );
        assert_eq!(
            retry_delay(&policy, &key(), 5, None),
            Duration::from_millis(100 + 7)
        );
    }
}
