//! How many worker invocations a tick starts (docs/scaling.md): enough for the claimable
//! backlog, no more than the provider's rate limit keeps busy, never more than the cap, less
//! those still running. A pure decision over what [`observe`] reads; `aws::doorbell` rings.
//! The same for deliverers ([`deliverers_to_start`], docs/delivery.md).

use std::time::Duration;

use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::{
    config::{DeliveryPolicy, FleetConfig, RateLimitPolicy, WorkerPolicy},
    domain::error::Result,
};

/// Seconds per call assumed before the ledger has any (the article's typical call).
const ASSUMED_SECONDS_PER_CALL: f64 = 2.5;

/// The backlog is counted up to this many jobs: more than any fleet drains in one tick, and the
/// count stays an index scan of bounded length.
const BACKLOG_COUNT_LIMIT: i64 = 1_000_000;

/// What the scaler reads before sizing the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Observed {
    /// Jobs claimable now (up to [`BACKLOG_COUNT_LIMIT`]).
    pub claimable: i64,
    /// Workers holding a live lease: invocations still running.
    pub running: i64,
    /// Mean latency of the calls of the last five minutes, when there were any.
    pub seconds_per_call: Option<f64>,
}

const OBSERVE: &str = r#"
SELECT (SELECT count(*) FROM (
            SELECT 1 FROM evaluation_outbox
            WHERE status = 'pending' AND available_at <= now() LIMIT $1) claimable),
       (SELECT count(DISTINCT locked_by) FROM evaluation_outbox
        WHERE status = 'processing' AND locked_until >= now()),
       (SELECT avg(latency_ms) / 1000.0 FROM provider_call
        WHERE started_at > now() - interval '5 minutes' AND finished_at IS NOT NULL)::float8
"#;

pub async fn observe(client: &impl GenericClient) -> Result<Observed> {
    let row = client.query_one(OBSERVE, &[&BACKLOG_COUNT_LIMIT]).await?;
    Ok(Observed {
        claimable: row.get(0),
        running: row.get(1),
        seconds_per_call: row.get(2),
    })
}

/// Invocations to start now. One invocation of `invocation` seconds at concurrency C finishes
/// about C × invocation / L jobs; the provider's limit keeps rate × L calls in flight, C per
/// invocation (Little's law).
pub fn invocations_to_start(
    observed: &Observed,
    fleet: &FleetConfig,
    worker: &WorkerPolicy,
    limit: &RateLimitPolicy,
    invocation: Duration,
) -> u32 {
    let seconds_per_call = observed
        .seconds_per_call
        .filter(|s| *s > 0.0)
        .unwrap_or(ASSUMED_SECONDS_PER_CALL);
    let concurrency = worker.concurrency.max(1) as f64;
    let per_invocation = (concurrency * invocation.as_secs_f64() / seconds_per_call).max(1.0);
    let for_backlog = (observed.claimable.max(0) as f64 / per_invocation).ceil();
    let for_rate = limit.requests_per_minute.map_or(f64::INFINITY, |rpm| {
        (f64::from(rpm) / 60.0 * seconds_per_call / concurrency).ceil()
    });
    let wanted = for_backlog.min(for_rate).min(f64::from(fleet.max_workers));
    (wanted as i64 - observed.running).max(0) as u32
}

/// Deliverer invocations to start now: one per `concurrency` deliveries that endpoints have
/// room for (the claim's bound per endpoint already keeps more deliverers from helping a slow
/// one), within the cap less those still running. Running deliverers with room of their own
/// claim within a poll, so what the backlog still shows is theirs to leave. `claimable`: the
/// deliveries endpoints have room for; `running`: deliverers holding a live lease.
pub fn deliverers_to_start(
    claimable: i64,
    running: i64,
    fleet: &FleetConfig,
    policy: &DeliveryPolicy,
) -> u32 {
    let concurrency = policy.concurrency.max(1) as i64;
    let wanted = (claimable.max(0) + concurrency - 1) / concurrency;
    let room = i64::from(fleet.max_deliverers) - running.max(0);
    wanted.min(room).max(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(claimable: i64, running: i64, seconds_per_call: Option<f64>) -> Observed {
        Observed {
            claimable,
            running,
            seconds_per_call,
        }
    }

    #[test]
    fn the_fleet_follows_the_backlog_the_rate_and_the_cap() {
        let worker = WorkerPolicy {
            concurrency: 16,
            ..WorkerPolicy::default()
        };
        let fleet = FleetConfig::default(); // cap 100
        let minute = Duration::from_secs(60);
        let rpm = |n| RateLimitPolicy {
            requests_per_minute: Some(n),
            tokens_per_minute: None,
        };
        let none = RateLimitPolicy::default();
        // (observed, limit, expected): one invocation does 16 × 60 / L jobs.
        let table = [
            (observed(0, 0, None), none, 0),
            (observed(1, 0, None), none, 1),
            // 2.5 s a call: 384 jobs per invocation.
            (observed(384, 0, Some(2.5)), none, 1),
            (observed(385, 0, Some(2.5)), none, 2),
            (observed(100_000, 0, Some(2.5)), none, 100),
            // 3,000 a minute = 50/s × 2.5 s = 125 in flight = 8 invocations of 16.
            (observed(100_000, 0, Some(2.5)), rpm(3000), 8),
            (observed(100_000, 0, Some(10.0)), rpm(3000), 32),
            // Those still running count.
            (observed(100_000, 5, Some(2.5)), rpm(3000), 3),
            (observed(100_000, 20, Some(2.5)), rpm(3000), 0),
            // No history yet: the article's 2.5 s.
            (observed(100_000, 0, None), rpm(3000), 8),
        ];
        for (seen, limit, expected) in table {
            let n = invocations_to_start(&seen, &fleet, &worker, &limit, minute);
            assert_eq!(n, expected, "{seen:?} {limit:?}");
        }
    }

    #[test]
    fn the_cap_holds_whatever_the_backlog() {
        let fleet = FleetConfig {
            max_workers: 3,
            ..FleetConfig::default()
        };
        let n = invocations_to_start(
            &observed(i64::MAX, 0, Some(0.01)),
            &fleet,
            &WorkerPolicy::default(),
            &RateLimitPolicy::default(),
            Duration::from_secs(1),
        );
        assert_eq!(n, 3);
    }

    #[test]
    fn deliverers_follow_what_endpoints_have_room_for_within_the_cap() {
        let fleet = FleetConfig {
            max_deliverers: 4,
            ..FleetConfig::default()
        };
        let policy = DeliveryPolicy {
            concurrency: 32,
            ..DeliveryPolicy::default()
        };
        let backlog = |claimable: i64, running: i64| (claimable, running);
        // (backlog, expected): one deliverer per 32 deliveries with room, 4 at most at once.
        let table = [
            (backlog(0, 0), 0),
            (backlog(1, 0), 1),
            (backlog(32, 0), 1),
            (backlog(33, 0), 2),
            (backlog(1_000, 0), 4),
            // Those still running count against the cap.
            (backlog(1_000, 1), 3),
            (backlog(1_000, 4), 0),
            (backlog(1_000, 9), 0),
            (backlog(33, 3), 1),
        ];
        for (seen, expected) in table {
            assert_eq!(
                deliverers_to_start(seen.0, seen.1, &fleet, &policy),
                expected,
                "{seen:?}"
            );
        }
    }
}
