//! The worker against a fake provider over loopback: billing once, fencing, the error table,
//! backoff, the breaker, and the ledger.

use std::time::{Duration, Instant};

use fake_provider::{Behavior, FakeProvider, Gate};
use tokio_util::sync::CancellationToken;
use triage::pipeline::outbox::{claim, Fencing, Lanes};

use crate::helpers::{spawn_app_with_fake, TestApp};

async fn post(app: &TestApp, subject: &str) -> String {
    let created = app.post_ticket(subject, "body of the ticket").await;
    assert_eq!(created.status, 201);
    created.body["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_ticket_goes_from_pending_to_done_with_one_billed_call() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let id = post(&app, "Charged twice").await;
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!((report.claimed, report.evaluated), (1, 1));

    let shown = app.get_ticket(&id).await.body;
    assert_eq!(shown["evaluation"]["status"], "done");
    assert_eq!(shown["evaluation"]["model_version"], "gpt-6-luna@medium");
    assert_eq!(fake.billed_calls().len(), 1);
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call WHERE outcome = 'ok' AND billed AND input_tokens > 0").await,
        1
    );
}

#[tokio::test]
async fn an_existing_result_finishes_the_job_without_a_call() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Same content").await;
    app.run_worker_once(&app.worker()).await;
    // Retention removed the finished job; the result stays. The same content comes again.
    app.pool
        .get()
        .await
        .unwrap()
        .execute("DELETE FROM evaluation_outbox", &[])
        .await
        .unwrap();
    let id = post(&app, "Same content").await;
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!((report.dedup_hits, report.evaluated), (1, 0));
    assert_eq!(fake.calls().len(), 1, "no second call");
    assert_eq!(
        app.get_ticket(&id).await.body["evaluation"]["status"],
        "done"
    );
}

#[tokio::test]
async fn ten_concurrent_workers_over_2000_items_bill_every_key_exactly_once() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |c| {
        c.database.pool_size = 60;
        c.worker.batch_size = 20;
        // What is tested is the claim (no job held twice), not timeouts: a call that times
        // out is billed and tried again by design, and a connection that is not made in time
        // fails the ingest. On a loaded machine, the fifty connections ingest_many opens at
        // once took longer than the pool's 3 s (CI, beside a build), and forty first calls
        // longer than fast_policy's 2 s.
        c.database.connect_timeout = Duration::from_secs(15);
        c.worker.call_timeout = Duration::from_secs(10);
        c.worker.invocation_budget = Duration::from_secs(15);
        c.worker.lease = Duration::from_secs(30);
    })
    .await;
    let tickets: Vec<_> = (0..2000)
        .map(|i| (format!("ticket {i}"), format!("message {i}")))
        .collect();
    app.ingest_many(&tickets).await;

    let workers: Vec<_> = (0..10).map(|_| app.worker()).collect();
    let runs = workers
        .iter()
        .map(|w| app.drain(w, Duration::from_secs(120)));
    futures::future::join_all(runs).await;

    assert_eq!(app.status_counts().await.get("done"), Some(&2000));
    let billed = fake.billed_by_content();
    assert_eq!(billed.len(), 2000, "every key was called");
    assert!(billed.values().all(|&n| n == 1), "a key was billed twice");
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_result").await,
        2000
    );
}

#[tokio::test]
async fn a_stale_worker_cannot_finish_a_job_someone_else_holds() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Contended").await;
    let client = app.pool.get().await.unwrap();
    let lease = Duration::from_millis(50);
    let stale = claim::claim(
        &client,
        "stale",
        1,
        lease,
        claim::Serves::Models,
        Lanes::default(),
    )
    .await
    .unwrap()
    .remove(0);
    // The stale worker stalls past its lease; the sweeper returns the job; another claims it.
    app.wait_until_lease_expired().await;
    triage::pipeline::sweep::return_expired_leases(&app.pool, &app.config.worker)
        .await
        .unwrap();
    let fresh = claim::claim(
        &client,
        "fresh",
        1,
        Duration::from_secs(60),
        claim::Serves::Models,
        Lanes::default(),
    )
    .await
    .unwrap()
    .remove(0);
    assert_ne!(stale.claim_token, fresh.claim_token);

    let evaluation = triage::providers::Evaluation {
        is_urgent: 0.1,
        department: "sales".into(),
        urgency_score: 0.1,
        answered_by: triage::providers::AnsweredBy::Model,
    };
    let conn = app.pool.get().await.unwrap();
    assert_eq!(
        stale
            .complete(&conn, &evaluation, &app.config.versions.policy)
            .await
            .unwrap(),
        Fencing::Lost
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_result").await,
        0,
        "stale result not stored"
    );
    let late = stale
        .reschedule(&conn, Duration::ZERO, "late", "timeout")
        .await
        .unwrap();
    assert_eq!(late, Fencing::Lost);
    let late = stale.dead_letter(&conn, "late", "timeout").await.unwrap();
    assert_eq!(late, Fencing::Lost);
    assert_eq!(
        app.status_counts().await.get("processing"),
        Some(&1),
        "the fresh claim is untouched"
    );

    let evaluation = triage::providers::Evaluation {
        is_urgent: 0.9,
        department: "billing".into(),
        urgency_score: 0.8,
        answered_by: triage::providers::AnsweredBy::Model,
    };
    assert_eq!(
        fresh
            .complete(&conn, &evaluation, &app.config.versions.policy)
            .await
            .unwrap(),
        Fencing::Held
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_result WHERE department = 'billing'")
            .await,
        1
    );
}

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

#[tokio::test]
async fn an_invocation_too_short_for_one_call_is_an_error_naming_the_call_timeout() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Late").await;
    // 1.5 s left, but a call may take 2 s plus its write: a Lambda timeout set too short.
    let deadline = Instant::now() + Duration::from_millis(1500);
    let error = app
        .worker()
        .run_invocation(deadline, &CancellationToken::new())
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("TRIAGE_CALL_TIMEOUT_SECONDS"), "{message}");
    assert!(message.contains("function timeout"), "{message}");
    assert!(fake.calls().is_empty());
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'pending'")
            .await,
        1,
        "nothing was claimed"
    );
}

#[tokio::test]
async fn the_worker_refuses_a_lease_shorter_than_its_invocation() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |c| c.worker.lease = Duration::from_secs(4)).await;
    let provider = triage::providers::AnyProvider::from_config(
        &app.config.provider,
        app.config.worker.call_timeout,
    )
    .unwrap();
    let refused =
        triage::pipeline::worker::Worker::new(app.pool.clone(), provider, app.config.clone());
    let error = refused
        .err()
        .expect("the lease is shorter than the invocation");
    assert!(
        error.to_string().contains("TRIAGE_LEASE_SECONDS"),
        "{error}"
    );
}

#[tokio::test]
async fn the_worker_refuses_a_lease_shorter_than_the_time_left_in_its_invocation() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let error = app
        .worker()
        .run_invocation(deadline, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("TRIAGE_LEASE_SECONDS"),
        "{error}"
    );
}

#[tokio::test]
async fn a_batch_size_of_one_drains_the_queue_within_one_invocation() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |c| c.worker.batch_size = 1).await;
    for subject in ["One", "Two", "Three"] {
        post(&app, subject).await;
    }
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!((report.claimed, report.evaluated), (3, 3), "{report:?}");
}

#[tokio::test]
async fn a_hung_call_times_out_as_transient_and_is_recorded_as_possibly_billed() {
    let fake = FakeProvider::start().await;
    fake.push(Behavior::Hang);
    let app = spawn_app_with_fake(&fake, |c| {
        c.worker.call_timeout = Duration::from_millis(300)
    })
    .await;
    post(&app, "Hangs").await;
    let started = Instant::now();
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!(report.rescheduled, 1);
    assert!(started.elapsed() < Duration::from_secs(3));
    let row = app.row("SELECT outcome, billed FROM provider_call").await;
    assert_eq!(row.get::<_, &str>(0), "timeout");
    assert_eq!(
        row.get::<_, Option<bool>>(1),
        None,
        "a timed-out call may have been billed"
    );
}

#[tokio::test]
async fn a_crash_mid_call_leaves_an_in_flight_ledger_row() {
    let fake = FakeProvider::start().await;
    fake.push(Behavior::Hang);
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Crashes").await;
    let worker = app.worker();
    let deadline = Instant::now() + app.config.worker.invocation_budget;
    let stop = CancellationToken::new();
    let invocation = worker.run_invocation(deadline, &stop);
    // The process dies while the call is in flight: the invocation is dropped mid-await.
    tokio::select! {
        _ = invocation => panic!("the call hangs"),
        _ = fake.wait_for_calls(1, Duration::from_secs(5)) => {}
    }
    let row = app
        .row("SELECT outcome, billed, finished_at IS NULL FROM provider_call")
        .await;
    assert_eq!(row.get::<_, &str>(0), "in_flight");
    assert_eq!(row.get::<_, Option<bool>>(1), None);
    assert!(row.get::<_, bool>(2));
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

#[tokio::test]
async fn calls_in_flight_do_not_hold_database_connections() {
    let fake = FakeProvider::start().await;
    fake.set_default(Behavior::Classify.after(Duration::from_millis(1000)));
    // Six calls in flight over two connections, whose wait is bounded at half a second: only
    // works if no job keeps its connection while the provider thinks.
    let app = spawn_app_with_fake(&fake, |c| {
        c.database.pool_size = 2;
        c.database.connect_timeout = Duration::from_millis(500);
        c.worker.concurrency = 6;
        c.worker.batch_size = 6;
    })
    .await;
    for i in 0..6 {
        post(&app, &format!("slow {i}")).await;
    }
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!((report.claimed, report.evaluated), (6, 6));
}

#[tokio::test]
async fn the_next_batch_is_claimed_while_the_slots_are_busy_and_no_more_than_one() {
    let fake = FakeProvider::start().await;
    // The first two calls are held until the state below is reached (however slow the
    // machine); the rest are quick.
    let gate = Gate::new();
    fake.push(Behavior::Classify.held(&gate));
    fake.push(Behavior::Classify.held(&gate));
    fake.set_default(Behavior::Classify.after(Duration::from_millis(150)));
    let app = spawn_app_with_fake(&fake, |config| {
        config.worker.concurrency = 2;
        config.worker.batch_size = 2;
        config.worker.invocation_budget = Duration::from_secs(20);
        config.worker.lease = Duration::from_secs(30);
    })
    .await;
    for n in 0..10 {
        post(&app, &format!("ticket {n}")).await;
    }
    let worker = app.worker();
    let done = std::sync::atomic::AtomicBool::new(false);
    let invocation = async {
        let report = app.run_worker_once(&worker).await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        report
    };
    // Claimed and unfinished jobs never exceed the calls in flight (C), the jobs started
    // ahead of them (C) and one waiting batch, and reach all of them while the first calls
    // are held (awaited, then released); sampled after that until the invocation ends.
    let processing = "SELECT count(*) FROM evaluation_outbox WHERE status = 'processing'";
    let observed = async {
        gate.wait_held(2, Duration::from_secs(10))
            .await
            .expect("the first two calls are held");
        app.wait_until(
            processing,
            |n| n >= 6,
            "the next two started and a batch waited",
        )
        .await;
        let now = app.count(processing).await;
        let while_calling = if fake.calls().len() == 2 { now } else { 0 };
        let mut most = now;
        gate.release();
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            most = most.max(app.count(processing).await);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        (while_calling, most)
    };
    let (report, (while_calling, most)) = tokio::join!(invocation, observed);
    assert_eq!(report.evaluated, 10, "{report:?}");
    assert_eq!(
        while_calling, 6,
        "the next two started and a batch waited while the first two calls ran"
    );
    assert_eq!(
        most, 6,
        "never more than C calls, C started ahead and one batch claimed"
    );
}

/// A fresh deploy, or autovacuum on tiny tables, analyzes them empty. The worker's statements
/// on its pooled session must then stay on custom plans: a generic plan made for empty tables
/// scans the results table and the day's ledger partition, and grows with them.
#[tokio::test]
async fn after_the_empty_tables_are_analyzed_the_workers_statements_keep_custom_plans() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |c| c.database.pool_size = 1).await;
    app.exec("ANALYZE").await;
    for i in 0..12 {
        post(&app, &format!("ticket {i}")).await;
    }
    assert_eq!(app.run_worker_once(&app.worker()).await.evaluated, 12);

    // The one pooled session ran every statement: what its prepared statements were planned as.
    let client = app.pool.get().await.unwrap();
    let plans = client
        .query(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
             WHERE (statement LIKE '%evaluation_result WHERE idempotency_key%'
                    OR statement LIKE '%UPDATE provider_call%')
               AND statement NOT LIKE '%pg_prepared_statements%'",
            &[],
        )
        .await
        .unwrap();
    assert!(plans.len() >= 2, "the start and the finish are prepared");
    for plan in plans {
        let (statement, generic, custom): (String, i64, i64) =
            (plan.get(0), plan.get(1), plan.get(2));
        assert_eq!(generic, 0, "a generic plan for {statement}");
        assert!(custom >= 12, "{custom} custom plans for {statement}");
    }
}
