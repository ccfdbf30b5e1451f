//! The provider circuit breaker, kept in the database so every worker instance sees it.
//!
//! closed → (a provider-wide failure, or `OUTAGE_THRESHOLD` consecutive timeouts/5xx/resets
//! across items) → open for a pause (`TRIAGE_BREAKER_COOLDOWN_SECONDS`, doubling per trip, up
//! to the backoff cap) → half-open: one worker wins the probe and evaluates one item →
//! success closes, failure re-opens. While open, nobody claims, and items caught by the
//! outage go back without spending an attempt: an outage of any length dead-letters nothing.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{Client, GenericClient};

use crate::{
    config::{RateLimitPolicy, WorkerPolicy},
    domain::error::Result,
    providers::FailureKind,
};

/// Consecutive item-level failures that mean "the provider is down".
pub const OUTAGE_THRESHOLD: i32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Claim normally; `counting` while failures are counted toward a trip (a success must
    /// reset them: closed and not counting, a success has nothing to write); `rate_held`
    /// while a 429's hold in the shared rate limit runs (calls must take slots to see it);
    /// `announced`, the limits the provider announced to any worker (the fleet's ceiling).
    Closed {
        counting: bool,
        rate_held: bool,
        announced: RateLimitPolicy,
    },
    /// This worker holds the half-open probe: claim one item.
    Probe,
    /// Paused until then: claim nothing.
    Open { until: DateTime<Utc> },
}

/// Decides whether this worker may claim, taking the probe when a pause has ended. The probe
/// is held for `probe_lease`; if its holder dies, the next worker takes it after that.
///
/// Runs before every claim, so its statements are prepared once per connection (deadpool's
/// statement cache).
pub async fn gate(
    client: &impl GenericClient,
    provider: &str,
    probe_lease: Duration,
) -> Result<Gate> {
    let take_probe = client
        .prepare_cached(
            r#"
            UPDATE provider_breaker
            SET state = 'half_open', probe_until = now() + make_interval(secs => $2), updated_at = now()
            WHERE provider = $1
              AND ((state = 'open' AND open_until <= now()) OR (state = 'half_open' AND probe_until <= now()))
            RETURNING 1
            "#,
        )
        .await?;
    let probe = client
        .query_opt(&take_probe, &[&provider, &probe_lease.as_secs_f64()])
        .await?;
    if probe.is_some() {
        return Ok(Gate::Probe);
    }
    // The rate limit's hold and announced limits are read here too: the claim is the one
    // statement every worker runs whether or not its calls take slots.
    let read_state = client
        .prepare_cached(
            r#"
            SELECT coalesce(b.state, 'closed'), coalesce(greatest(b.open_until, b.probe_until), now()),
                   coalesce(b.consecutive_failures > 0, false),
                   coalesce(r.held_until > now(), false), r.announced_rpm, r.announced_tpm
            FROM (SELECT 1) one LEFT JOIN provider_breaker b ON b.provider = $1
                 LEFT JOIN provider_rate_limit r ON r.provider = $1
            "#,
        )
        .await?;
    let row = client.query_one(&read_state, &[&provider]).await?;
    Ok(match row.get::<_, &str>(0) {
        "closed" => Gate::Closed {
            counting: row.get(2),
            rate_held: row.get(3),
            announced: RateLimitPolicy {
                requests_per_minute: row.get::<_, Option<i32>>(4).map(|l| l as u32),
                tokens_per_minute: row.get::<_, Option<i32>>(5).map(|l| l as u32),
            },
        },
        _ => Gate::Open { until: row.get(1) },
    })
}

/// A call the provider answered: the outage, if any, is over. Writes nothing when already
/// closed with no failures counted. The worker skips it altogether while the breaker was
/// closed and not counting at its claim and it saw no failure since (no statement on the hot
/// path). Prepared once per connection (deadpool's statement cache).
pub async fn record_success(client: &impl GenericClient, provider: &str) -> Result<()> {
    let statement = client
        .prepare_cached(
            r#"
            UPDATE provider_breaker
            SET state = 'closed', consecutive_failures = 0, trips = 0, open_until = NULL, probe_until = NULL,
                updated_at = now()
            WHERE provider = $1 AND (state <> 'closed' OR consecutive_failures <> 0)
            "#,
        )
        .await?;
    client.execute(&statement, &[&provider]).await?;
    Ok(())
}

/// Counts a failed call; returns whether the breaker is open afterwards (tripped now or by
/// someone else), in which case the failed item must not spend an attempt.
pub async fn record_failure(
    client: &mut Client,
    provider: &str,
    kind: FailureKind,
    error: &str,
    policy: &WorkerPolicy,
) -> Result<bool> {
    let tx = client.transaction().await?;
    tx.execute(
        "INSERT INTO provider_breaker (provider) VALUES ($1) ON CONFLICT (provider) DO NOTHING",
        &[&provider],
    )
    .await?;
    let row = tx
        .query_one(
            "SELECT state, consecutive_failures, trips FROM provider_breaker WHERE provider = $1 FOR UPDATE",
            &[&provider],
        )
        .await?;
    let (state, failures, trips): (String, i32, i32) =
        (row.get(0), row.get::<_, i32>(1) + 1, row.get(2));
    let trip = state == "half_open"
        || kind.class() == crate::providers::ErrorClass::ProviderWide
        || (kind.counts_toward_outage() && failures >= OUTAGE_THRESHOLD);
    let open = if trip && state != "open" {
        let pause = pause_after(policy, trips + 1);
        tx.execute(
            r#"
            UPDATE provider_breaker
            SET state = 'open', consecutive_failures = $2, trips = $3,
                open_until = now() + make_interval(secs => $4), probe_until = NULL,
                last_error = $5, updated_at = now()
            WHERE provider = $1
            "#,
            &[
                &provider,
                &failures,
                &(trips + 1),
                &pause.as_secs_f64(),
                &error,
            ],
        )
        .await?;
        tracing::warn!(
            provider,
            failures,
            pause_seconds = pause.as_secs_f64(),
            "circuit breaker open"
        );
        true
    } else {
        tx.execute(
            "UPDATE provider_breaker SET consecutive_failures = $2, updated_at = now() WHERE provider = $1",
            &[&provider, &failures],
        )
        .await?;
        state == "open"
    };
    tx.commit().await?;
    Ok(open)
}

/// The pause after the n-th trip in a row: the cooldown, doubling, capped by the backoff cap.
fn pause_after(policy: &WorkerPolicy, trip: i32) -> Duration {
    let doubling = 1u32 << (trip - 1).clamp(0, 16) as u32;
    policy
        .breaker_cooldown
        .saturating_mul(doubling)
        .min(policy.backoff_max.max(policy.breaker_cooldown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap() {
        let policy = WorkerPolicy {
            breaker_cooldown: Duration::from_secs(30),
            ..WorkerPolicy::default()
        };
        let pauses: Vec<u64> = (1..=6).map(|t| pause_after(&policy, t).as_secs()).collect();
        assert_eq!(pauses, [30, 60, 120, 240, 300, 300]);
    }
}
