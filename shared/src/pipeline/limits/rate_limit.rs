//! The provider's rate limit, shared by every worker through one row per provider in
//! `provider_rate_limit` (docs/scaling.md). Each budget (requests, tokens) is a GCRA: a
//! theoretical arrival time (TAT) that each call pushes forward by its cost (one request's
//! share of the minute, its estimated tokens' share). A call may start once its budget's TAT
//! is less than one second's share ahead, so calls spread over the minute instead of
//! spending it at once. A worker *reserves* its slot in one statement and sleeps until it:
//! one round trip per call, and waiters do not poll the row.
//!
//! A 429, or an answer whose headers say a budget is empty, sets `held_until`: no worker
//! starts a call before it, so the whole fleet slows down, not one job.

use std::{
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
    time::Duration,
};

use deadpool_postgres::GenericClient;

use crate::{config::RateLimitPolicy, domain::error::Result, providers::RateSignals};

/// How long every worker holds off after a 429 that names neither `Retry-After` nor a reset.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(1);

/// How far ahead of now a budget may be spent: one second's share of the minute.
const BURST: Duration = Duration::from_secs(1);

/// The per-call costs and tolerances of the two budgets, from the lower of the configured
/// and the announced limits. Zero costs mean "no limit" (only `held_until` applies).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pace {
    request_interval: Duration,
    request_tolerance: Duration,
    /// Seconds of the token budget one token costs.
    token_interval_secs: f64,
    token_tolerance: Duration,
}

impl Pace {
    pub fn new(configured: RateLimitPolicy, announced: RateLimitPolicy) -> Self {
        let lowest = |a: Option<u32>, b: Option<u32>| a.into_iter().chain(b).min();
        let requests = lowest(
            configured.requests_per_minute,
            announced.requests_per_minute,
        );
        let tokens = lowest(configured.tokens_per_minute, announced.tokens_per_minute);
        let (request_interval, request_tolerance) = share(requests);
        let (token_interval, token_tolerance) = share(tokens);
        Self {
            request_interval,
            request_tolerance,
            token_interval_secs: token_interval.as_secs_f64(),
            token_tolerance,
        }
    }

    /// No limit configured or announced: no call needs a slot.
    pub fn is_unlimited(&self) -> bool {
        *self == Pace::default()
    }

    /// What `tokens` cost of the token budget, in seconds (negative gives some back).
    pub fn token_cost_secs(&self, tokens: i64) -> f64 {
        self.token_interval_secs * tokens as f64
    }
}

/// One unit's share of a per-minute limit, and the tolerance that allows a burst of about one
/// second's share (a single unit when a second's share is less than one).
fn share(per_minute: Option<u32>) -> (Duration, Duration) {
    let Some(limit) = per_minute else {
        return (Duration::ZERO, Duration::ZERO);
    };
    let interval = Duration::from_secs_f64(60.0 / f64::from(limit));
    (interval, BURST.saturating_sub(interval))
}

/// The limits a worker applies: the configured ceiling, lowered by what the provider announces
/// in its headers: heard on this process's answers, or by another worker's and read from the
/// shared row at each claim ([`Limiter::adopt`]).
#[derive(Debug, Default)]
pub struct Limiter {
    configured: RateLimitPolicy,
    announced_rpm: AtomicU32,
    announced_tpm: AtomicU32,
    /// A 429 was heard: from then on every call takes a slot, so the fleet's hold applies.
    refused: AtomicBool,
}

impl Limiter {
    pub fn new(configured: RateLimitPolicy) -> Self {
        Self {
            configured,
            ..Self::default()
        }
    }

    pub fn pace(&self) -> Pace {
        let announced = |limit: &AtomicU32| Some(limit.load(Ordering::Relaxed)).filter(|&l| l > 0);
        Pace::new(
            self.configured,
            RateLimitPolicy {
                requests_per_minute: announced(&self.announced_rpm),
                tokens_per_minute: announced(&self.announced_tpm),
            },
        )
    }

    /// Whether calls take a slot in the shared limit: with no limit configured or announced
    /// and no 429 heard, the hot path has no rate-limit statement at all.
    pub fn engaged(&self) -> bool {
        self.refused.load(Ordering::Relaxed) || !self.pace().is_unlimited()
    }

    /// A 429 (heard here, or a hold another worker's 429 set): the provider has a limit this
    /// process did not know of.
    pub fn engage(&self) {
        self.refused.store(true, Ordering::Relaxed);
    }

    /// The limits an answer's headers announce; returns them when they are news to this
    /// process, for the fleet's row (the same values heard again write nothing).
    pub fn heard(&self, signals: &RateSignals) -> Option<RateLimitPolicy> {
        let announced = RateLimitPolicy {
            requests_per_minute: signals.requests_per_minute,
            tokens_per_minute: signals.tokens_per_minute,
        };
        self.adopt(announced).then_some(announced)
    }

    /// The limits the fleet's row holds (`None`: never announced); returns whether they
    /// changed what this process applies.
    pub fn adopt(&self, announced: RateLimitPolicy) -> bool {
        let store = |limit: &AtomicU32, value: Option<u32>| {
            value.is_some_and(|value| limit.swap(value, Ordering::Relaxed) != value)
        };
        let rpm = store(&self.announced_rpm, announced.requests_per_minute);
        let tpm = store(&self.announced_tpm, announced.tokens_per_minute);
        rpm || tpm
    }
}

/// What the shared budget answered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Take {
    /// A slot is reserved for this call: start it after `wait`.
    Reserved { wait: Duration },
    /// No slot opens within the wait allowed; the budget opens in about `opens_in`.
    Full { opens_in: Duration },
}

/// The slot, for statements that start with a `gate (go)` CTE saying whether to take one:
/// reserves the next slot for a call of `$4` seconds of tokens unless it opens later than `$6`
/// seconds from now ($1 provider, $2/$3 the request interval and tolerance, $5 the token
/// tolerance). The row is created on first use. `SLOT_WAIT` reads what it answered. One text,
/// used by [`take`] and by the ledger's start of a call (`ledger::start_call`), which takes the
/// slot and writes the ledger row in one statement.
macro_rules! slot_cte {
    () => {
        r#"slot AS (
    INSERT INTO provider_rate_limit AS r (provider, request_tat, token_tat)
    SELECT $1, now() + make_interval(secs => $2), now() + make_interval(secs => $4)
    FROM gate WHERE gate.go
    ON CONFLICT (provider) DO UPDATE
    SET request_tat = greatest(r.request_tat, now()) + make_interval(secs => $2),
        token_tat = greatest(r.token_tat, now()) + make_interval(secs => $4),
        updated_at = now()
    WHERE greatest(r.held_until,
                   r.request_tat - make_interval(secs => $3),
                   r.token_tat - make_interval(secs => $5))
          <= now() + make_interval(secs => $6)
    RETURNING greatest(r.held_until,
                       r.request_tat - make_interval(secs => $2 + $3),
                       r.token_tat - make_interval(secs => $4 + $5),
                       now()) AS starts
)"#
    };
}

/// Seconds until the reserved slot (NULL: none was reserved), and until the budget opens.
macro_rules! slot_wait {
    () => {
        r#"extract(epoch FROM (SELECT starts FROM slot) - now())::float8,
       extract(epoch FROM (
           SELECT greatest(held_until,
                           request_tat - make_interval(secs => $3),
                           token_tat - make_interval(secs => $5),
                           now())
           FROM provider_rate_limit WHERE provider = $1) - now())::float8"#
    };
}
pub(crate) use {slot_cte, slot_wait};

const TAKE: &str = concat!(
    "WITH gate AS (SELECT true AS go), ",
    slot_cte!(),
    "\nSELECT ",
    slot_wait!()
);

/// The slot's parameters ($2 to $6 of [`slot_cte`]) for a call of `tokens` (estimated).
pub(crate) fn slot_params(pace: &Pace, tokens: i64, max_wait: Duration) -> [f64; 5] {
    [
        pace.request_interval.as_secs_f64(),
        pace.request_tolerance.as_secs_f64(),
        pace.token_cost_secs(tokens),
        pace.token_tolerance.as_secs_f64(),
        max_wait.as_secs_f64(),
    ]
}

/// What [`slot_wait`] read.
pub(crate) fn answered(wait: Option<f64>, opens_in: Option<f64>) -> Take {
    let secs = |value: Option<f64>| Duration::from_secs_f64(value.unwrap_or(0.0).max(0.0));
    match wait {
        Some(wait) => Take::Reserved {
            wait: secs(Some(wait)),
        },
        None => Take::Full {
            opens_in: secs(opens_in),
        },
    }
}

/// A slot alone (no ledger row): what the shared limit answers a caller of `tokens`.
pub async fn take(
    client: &impl GenericClient,
    provider: &str,
    pace: &Pace,
    tokens: i64,
    max_wait: Duration,
) -> Result<Take> {
    let statement = client.prepare_cached(TAKE).await?;
    let [a, b, c, d, e] = slot_params(pace, tokens, max_wait);
    let row = client
        .query_one(&statement, &[&provider, &a, &b, &c, &d, &e])
        .await?;
    Ok(answered(row.get(0), row.get(1)))
}

/// What a finished call changes in the shared budget: tokens given back or charged (the
/// estimate against the usage reported, or the whole estimate for a call refused with a 429),
/// and a hold for every worker.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Settlement {
    pub token_correction: i64,
    pub hold: Option<Duration>,
    /// Limits the provider announced that this process had not heard: for the fleet's row.
    pub announced: Option<RateLimitPolicy>,
}

impl Settlement {
    /// After a 429: the tokens were not spent, and nobody calls until the provider's reset.
    pub fn refused(estimated_tokens: i64, retry_after: Option<Duration>) -> Self {
        Self {
            token_correction: -estimated_tokens,
            hold: Some(hold_after_refusal(retry_after)),
            announced: None,
        }
    }

    /// After an answer: the usage it reported, and a hold when a budget is empty.
    pub fn answered(estimated_tokens: i64, used_tokens: i64, signals: &RateSignals) -> Self {
        Self {
            token_correction: used_tokens - estimated_tokens,
            hold: signals.exhausted_for,
            announced: None,
        }
    }
}

/// How long every worker holds off after a 429.
pub fn hold_after_refusal(retry_after: Option<Duration>) -> Duration {
    retry_after.unwrap_or(DEFAULT_HOLD)
}

/// A request limit announced for the first time ($4) also charges the request that heard it
/// to the fleet's pace: it was made outside it, and counts in the provider's window.
const SETTLE: &str = r#"
INSERT INTO provider_rate_limit AS r (provider, request_tat, token_tat, held_until, announced_rpm, announced_tpm)
VALUES ($1, now() + make_interval(secs => coalesce(60.0 / $4::int, 0)::float8),
        now() + make_interval(secs => $2), now() + make_interval(secs => $3), $4, $5)
ON CONFLICT (provider) DO UPDATE
SET request_tat = CASE WHEN $4::int IS NULL THEN r.request_tat
                       ELSE greatest(r.request_tat, now()) + make_interval(secs => (60.0 / $4::int)::float8) END,
    token_tat = r.token_tat + make_interval(secs => $2),
    held_until = greatest(r.held_until, now() + make_interval(secs => $3)),
    announced_rpm = coalesce($4, r.announced_rpm),
    announced_tpm = coalesce($5, r.announced_tpm),
    updated_at = now()
"#;

/// Writes `settlement`; no statement when it changes nothing (the common case without a
/// token limit and with the announced limits already known), so the hot path stays at one
/// limiter round trip per call.
pub async fn settle(
    client: &impl GenericClient,
    provider: &str,
    pace: &Pace,
    settlement: Settlement,
) -> Result<()> {
    let tokens = pace.token_cost_secs(settlement.token_correction);
    if tokens == 0.0 && settlement.hold.is_none() && settlement.announced.is_none() {
        return Ok(());
    }
    let hold = settlement.hold.unwrap_or_default().as_secs_f64();
    let announced = settlement.announced.unwrap_or_default();
    let column = |limit: Option<u32>| limit.map(|limit| limit.min(i32::MAX as u32) as i32);
    let statement = client.prepare_cached(SETTLE).await?;
    client
        .execute(
            &statement,
            &[
                &provider,
                &tokens,
                &hold,
                &column(announced.requests_per_minute),
                &column(announced.tokens_per_minute),
            ],
        )
        .await?;
    if let Some(hold) = settlement.hold {
        tracing::info!(
            provider,
            hold_seconds = hold.as_secs_f64(),
            "provider rate limit reached: every worker holds off"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rpm: Option<u32>, tpm: Option<u32>) -> RateLimitPolicy {
        RateLimitPolicy {
            requests_per_minute: rpm,
            tokens_per_minute: tpm,
        }
    }

    #[test]
    fn a_per_minute_limit_becomes_an_interval_and_a_burst_of_one_seconds_share() {
        // (rpm, interval ms, tolerance ms): 600 rpm = 10/s, so 10 calls may start at once.
        let table = [
            (600, 100, 900),
            (2400, 25, 975),
            (60, 1000, 0),
            (30, 2000, 0),
        ];
        for (rpm, interval, tolerance) in table {
            let pace = Pace::new(limits(Some(rpm), None), RateLimitPolicy::default());
            assert_eq!(
                (pace.request_interval, pace.request_tolerance),
                (
                    Duration::from_millis(interval),
                    Duration::from_millis(tolerance)
                ),
                "{rpm} rpm"
            );
        }
    }

    #[test]
    fn the_lower_of_configured_and_announced_limits_applies_and_unset_is_no_limit() {
        let pace = |configured, announced| Pace::new(configured, announced);
        let none = RateLimitPolicy::default();
        assert_eq!(pace(none, none), Pace::default());
        assert_eq!(
            pace(limits(Some(600), None), limits(Some(60), None)).request_interval,
            Duration::from_secs(1),
            "the provider's lower limit wins"
        );
        assert_eq!(
            pace(limits(Some(60), None), limits(Some(600), None)).request_interval,
            Duration::from_secs(1),
            "the configured number is a ceiling"
        );
        let tokens = pace(none, limits(None, Some(60_000)));
        assert_eq!(tokens.token_cost_secs(1000), 1.0);
        assert_eq!(tokens.token_cost_secs(-500), -0.5);
    }

    #[test]
    fn a_limiter_hears_the_providers_limits() {
        let limiter = Limiter::new(limits(Some(600), None));
        limiter.heard(&RateSignals {
            requests_per_minute: Some(120),
            tokens_per_minute: Some(6000),
            ..RateSignals::default()
        });
        assert_eq!(limiter.pace().request_interval, Duration::from_millis(500));
        assert_eq!(limiter.pace().token_cost_secs(100), 1.0);
    }

    #[test]
    fn only_limits_new_to_the_process_are_passed_on_to_the_fleet() {
        let limiter = Limiter::new(RateLimitPolicy::default());
        let heard = |rpm| RateSignals {
            requests_per_minute: rpm,
            ..RateSignals::default()
        };
        assert_eq!(limiter.heard(&heard(None)), None, "nothing announced");
        assert_eq!(
            limiter.heard(&heard(Some(120))),
            Some(limits(Some(120), None))
        );
        assert_eq!(limiter.heard(&heard(Some(120))), None, "heard before");
        assert!(
            !limiter.adopt(limits(Some(120), None)),
            "the fleet's row says the same"
        );
        assert!(
            limiter.adopt(limits(Some(60), Some(6000))),
            "another worker heard lower"
        );
        assert_eq!(limiter.pace().request_interval, Duration::from_secs(1));
        assert!(limiter.engaged());
    }

    #[test]
    fn settlements_give_back_refused_tokens_and_charge_what_was_used() {
        assert_eq!(
            Settlement::refused(1100, None),
            Settlement {
                token_correction: -1100,
                hold: Some(DEFAULT_HOLD),
                announced: None,
            }
        );
        assert_eq!(
            Settlement::refused(1100, Some(Duration::from_secs(20))).hold,
            Some(Duration::from_secs(20))
        );
        let empty = RateSignals {
            exhausted_for: Some(Duration::from_millis(300)),
            ..RateSignals::default()
        };
        assert_eq!(
            Settlement::answered(1100, 150, &empty),
            Settlement {
                token_correction: -950,
                hold: Some(Duration::from_millis(300)),
                announced: None,
            }
        );
    }
}
