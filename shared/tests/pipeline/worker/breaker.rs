//! The breaker: a provider-wide failure pauses claiming and spends no attempt, an outage
//! outlasting the retry schedule dead-letters nothing, one probe after the pause closes it.

use std::time::{Duration, Instant};

use fake_provider::{Behavior, FakeProvider};

use crate::helpers::{spawn_app_with_fake, TestApp};

use super::post;

#[tokio::test]
async fn a_provider_wide_failure_pauses_claiming_and_spends_no_attempt() {
    let fake = FakeProvider::start().await;
    fake.set_outage(Some(Behavior::Unauthorized));
    let app = spawn_app_with_fake(&fake, |c| {
        c.worker.breaker_cooldown = Duration::from_secs(60)
    })
    .await;
    for i in 0..5 {
        post(&app, &format!("ticket {i}")).await;
    }
    let worker = app.worker();
    let report = app.run_worker_once(&worker).await;
    assert!(report.paused);
    assert_eq!(report.dead_lettered + report.rescheduled, 0);
    let calls = fake.calls().len();
    assert!(
        calls <= app.config.worker.concurrency,
        "only calls already in flight were made ({calls})"
    );
    // A job started ahead of a free call slot (C = 4, five jobs) is withdrawn from the ledger
    // when the breaker opens before its call: every row left is a call made.
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call").await,
        calls as i64
    );
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0"
        )
        .await,
        5
    );
    let again = app.run_worker_once(&worker).await;
    assert_eq!(
        (again.claimed, again.paused),
        (0, true),
        "nobody claims while the breaker is open"
    );
}

#[tokio::test]
async fn an_outage_longer_than_the_retry_schedule_dead_letters_nothing() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |c| {
        c.database.pool_size = 20;
        c.worker.batch_size = 25;
        c.worker.concurrency = 8;
    })
    .await;
    // 1,000 tickets, 20% of them duplicates of others: 800 unique contents.
    let tickets: Vec<_> = (0..1000)
        .map(|i| (format!("ticket {}", i % 800), "same body".to_string()))
        .collect();
    app.ingest_many(&tickets).await;
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox").await,
        800
    );

    // The whole retry schedule (5 attempts, 10 ms doubling to 200 ms, plus jitter) is well
    // under a second; the outage lasts three, with 503s, resets and timeouts in turn.
    fake.set_outage(Some(Behavior::Status(503)));
    let worker = app.worker();
    let outage_started = Instant::now();
    let mut phase = 0;
    while outage_started.elapsed() < Duration::from_secs(3) {
        let behavior = [
            Behavior::Status(503),
            Behavior::ResetConnection,
            Behavior::Status(500),
        ][phase % 3]
            .clone();
        fake.set_outage(Some(behavior));
        phase += 1;
        let report = app.run_worker_once(&worker).await;
        if report.claimed == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let calls_during_outage = fake.calls().len();
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'")
            .await,
        0
    );

    fake.set_outage(None);
    app.drain(&worker, Duration::from_secs(60)).await;
    let counts = app.status_counts().await;
    let billed = fake.billed_by_content();
    println!(
        "outage test: tickets=1000 unique_keys=800 calls_during_outage={calls_during_outage} billed_calls={} dead_letters={}",
        fake.billed_calls().len(),
        counts.get("dead").copied().unwrap_or(0)
    );
    assert_eq!(counts.get("dead"), None);
    assert_eq!(counts.get("done"), Some(&800));
    assert_eq!(billed.len(), 800);
    assert!(
        billed.values().all(|&n| n == 1),
        "successful calls == unique keys"
    );
    assert!(
        calls_during_outage < 100,
        "the breaker stopped the spending ({calls_during_outage} calls)"
    );
    let duplicates_done = app
        .count(
            "SELECT count(*) FROM ticket_evaluation te JOIN evaluation_result r USING (idempotency_key)",
        )
        .await;
    assert_eq!(
        duplicates_done, 1000,
        "every ticket, duplicates included, resolves to a result"
    );
}

async fn wait_for_pause_to_end(app: &TestApp) {
    app.wait_until(
        "SELECT count(*) FROM provider_breaker WHERE state = 'open' AND open_until > now()",
        |open| open == 0,
        "the pause never ended",
    )
    .await;
}

#[tokio::test]
async fn after_the_pause_one_probe_tests_the_provider_and_success_closes_the_breaker() {
    let fake = FakeProvider::start().await;
    fake.set_outage(Some(Behavior::Unauthorized));
    let app = spawn_app_with_fake(&fake, |c| c.worker.concurrency = 1).await;
    for i in 0..5 {
        post(&app, &format!("ticket {i}")).await;
    }
    let worker = app.worker();
    assert!(app.run_worker_once(&worker).await.paused);

    // Still down when the pause ends: the probe fails and the next pause is twice as long.
    wait_for_pause_to_end(&app).await;
    let probe = app.run_worker_once(&worker).await;
    assert_eq!(
        (probe.claimed, probe.released),
        (1, 1),
        "exactly one probe item, given back"
    );
    let row = app.row("SELECT state, trips, extract(epoch FROM open_until - updated_at)::float8 FROM provider_breaker").await;
    assert_eq!((row.get::<_, &str>(0), row.get::<_, i32>(1)), ("open", 2));
    assert!(
        (row.get::<_, f64>(2) - 0.2).abs() < 0.05,
        "second pause doubles the 100 ms cooldown"
    );

    // The provider is back: the probe succeeds, the breaker closes, the backlog drains.
    fake.set_outage(None);
    wait_for_pause_to_end(&app).await;
    let probe = app.run_worker_once(&worker).await;
    assert_eq!((probe.claimed, probe.evaluated), (1, 1));
    assert_eq!(
        app.count("SELECT count(*) FROM provider_breaker WHERE state = 'closed' AND trips = 0")
            .await,
        1
    );
    app.drain(&worker, Duration::from_secs(10)).await;
    assert_eq!(app.status_counts().await.get("done"), Some(&5));
    assert_eq!(
        app.count("SELECT max(attempts)::int8 FROM evaluation_outbox")
            .await,
        1,
        "the outage spent no attempt"
    );
}

#[tokio::test]
async fn a_provider_that_refuses_connections_pauses_claiming() {
    // Nothing listens on the fake's port once it is shut down: connection refused.
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |c| {
        c.worker.breaker_cooldown = Duration::from_secs(60)
    })
    .await;
    fake.shutdown().await;
    post(&app, "Nobody home").await;
    let report = app.run_worker_once(&app.worker()).await;
    assert!(report.paused);
    assert_eq!(report.released, 1);
    let row = app
        .row("SELECT status, attempts FROM evaluation_outbox")
        .await;
    assert_eq!(
        (row.get::<_, &str>(0), row.get::<_, i32>(1)),
        ("pending", 0)
    );
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call WHERE outcome = 'connect_failed'")
            .await,
        1
    );
}
