//! The worker's resources: calls in flight hold no database connection, the next batch is
//! claimed while the slots are busy (and no more than one), and its statements keep
//! custom plans.

use std::time::Duration;

use fake_provider::{Behavior, FakeProvider, Gate};

use crate::helpers::spawn_app_with_fake;

use super::post;

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
