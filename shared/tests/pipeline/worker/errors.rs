//! The error table: what is dead-lettered after how many calls, what backs off and spends
//! an attempt, and a 429 that spends none.

use std::time::Duration;

use fake_provider::{Behavior, FakeProvider};
use triage::pipeline::outbox::{claim, Lanes};

use crate::helpers::spawn_app_with_fake;

use super::post;

#[tokio::test]
async fn a_job_that_crashes_every_worker_is_dead_lettered_after_max_attempts() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Poison").await;
    let client = app.pool.get().await.unwrap();
    for _ in 0..app.config.worker.max_attempts {
        let claimed = claim::claim(
            &client,
            "doomed",
            1,
            Duration::from_millis(20),
            claim::Serves::Models,
            Lanes::default(),
        )
        .await
        .unwrap();
        assert_eq!(claimed.len(), 1, "still claimable");
        app.wait_until_lease_expired().await;
        triage::pipeline::sweep::return_expired_leases(&app.pool, &app.config.worker)
            .await
            .unwrap();
    }
    let row = client
        .query_one(
            "SELECT status, error_class, attempts FROM evaluation_outbox",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, &str>(0), "dead");
    assert_eq!(row.get::<_, &str>(1), "lease_expired");
    assert_eq!(row.get::<_, i32>(2), app.config.worker.max_attempts);
}

#[tokio::test]
async fn permanent_errors_are_called_exactly_once_and_dead_lettered() {
    let fake = FakeProvider::start().await;
    for (needle, behavior) in [
        ("invalid", Behavior::InvalidRequest),
        ("context", Behavior::ContextLength),
        ("policy", Behavior::ContentPolicy),
    ] {
        fake.when_contains(needle, behavior);
    }
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    for subject in ["invalid one", "context two", "policy three", "healthy four"] {
        post(&app, subject).await;
    }
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let counts = app.status_counts().await;
    assert_eq!(
        (counts.get("dead"), counts.get("done")),
        (Some(&3), Some(&1))
    );
    assert_eq!(fake.calls().len(), 4, "one call each, no retries");
    let reasons: Vec<String> = app
        .pool
        .get()
        .await
        .unwrap()
        .query(
            "SELECT error_class FROM evaluation_outbox WHERE status = 'dead' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        reasons,
        ["content_policy", "context_length", "invalid_request"]
    );
}

#[tokio::test]
async fn contract_violations_are_dead_lettered_and_never_stored() {
    let fake = FakeProvider::start().await;
    for (needle, behavior) in [
        ("legal", Behavior::OutOfContract),
        ("refuse", Behavior::Refusal),
        ("prose", Behavior::NotJsonContent),
        ("filter", Behavior::ContentFilter),
        (
            "scores",
            Behavior::Answer(
                serde_json::json!({"is_urgent": 2, "department": "billing", "urgency_score": 0.5}),
            ),
        ),
    ] {
        fake.when_contains(needle, behavior);
    }
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    for subject in ["legal", "refuse", "prose", "filter", "scores"] {
        post(&app, subject).await;
    }
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE error_class = 'contract_violation'"
        )
        .await,
        5
    );
    assert_eq!(app.count("SELECT count(*) FROM evaluation_result").await, 0);
    assert_eq!(fake.calls().len(), 5);
}

#[tokio::test]
async fn an_answer_cut_at_the_token_cap_is_dead_lettered_as_output_truncated() {
    let fake = FakeProvider::start().await;
    fake.set_default(Behavior::Truncated);
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Runaway answer").await;
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let row = app
        .row("SELECT status, error_class FROM evaluation_outbox")
        .await;
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, String>(1)),
        ("dead".into(), "output_truncated".into())
    );
    assert_eq!(app.count("SELECT count(*) FROM evaluation_result").await, 0);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM provider_call WHERE outcome = 'output_truncated' AND billed"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn a_transient_error_backs_off_spends_an_attempt_and_then_succeeds() {
    let fake = FakeProvider::start().await;
    fake.push(Behavior::Status(500));
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Flaky once").await;
    let worker = app.worker();
    let first = app.run_worker_once(&worker).await;
    assert_eq!(first.rescheduled, 1);
    let row = app
        .row("SELECT attempts, error_class, available_at > now() FROM evaluation_outbox")
        .await;
    assert_eq!(
        (row.get::<_, i32>(0), row.get::<_, &str>(1)),
        (1, "server_error")
    );
    app.drain(&worker, Duration::from_secs(10)).await;
    assert_eq!(app.status_counts().await.get("done"), Some(&1));
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call").await,
        2,
        "one ledger row per call"
    );
}

#[tokio::test]
async fn a_429_releases_the_job_until_retry_after_without_spending_its_attempt() {
    let fake = FakeProvider::start().await;
    fake.push(Behavior::RateLimited {
        retry_after: Some(Duration::from_secs(3)),
    });
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Rate limited").await;
    let worker = app.worker();
    assert_eq!(app.run_worker_once(&worker).await.released, 1);
    let row = app
        .row("SELECT attempts, extract(epoch FROM available_at - now())::float8 FROM evaluation_outbox")
        .await;
    let (attempts, wait): (i32, f64) = (row.get(0), row.get(1));
    assert_eq!(attempts, 0, "a rate limit gives the attempt back");
    assert!(
        wait > 2.5,
        "next attempt only after Retry-After, not the 10 ms backoff (was {wait:.3} s)"
    );
    assert_eq!(
        app.run_worker_once(&worker).await.claimed,
        0,
        "not claimable before Retry-After"
    );
    assert_eq!(fake.calls().len(), 1);
}
