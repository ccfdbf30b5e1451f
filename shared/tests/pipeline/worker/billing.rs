//! Billing once: a ticket goes to done with one billed call, an existing result needs none,
//! ten workers bill every key once, a stale worker is fenced; and the ledger keeps a row
//! for a hung call and for one a crash cut.

use std::time::{Duration, Instant};

use fake_provider::{Behavior, FakeProvider};
use tokio_util::sync::CancellationToken;
use triage::pipeline::outbox::{claim, Fencing, Lanes};

use crate::helpers::spawn_app_with_fake;

use super::post;

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
        stale.complete(&conn, &evaluation).await.unwrap(),
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
        fresh.complete(&conn, &evaluation).await.unwrap(),
        Fencing::Held
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_result WHERE department = 'billing'")
            .await,
        1
    );
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
