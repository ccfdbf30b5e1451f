//! The sweeper against real rows and real row locks.

use std::time::Duration;

use triage::pipeline::{
    outbox::{claim, Lanes},
    sweep,
};

use crate::helpers::{spawn_app, TestApp};

async fn claim_with_expired_lease(app: &TestApp) -> triage::pipeline::outbox::ClaimedJob {
    app.post_ticket("Sweep me", "body").await;
    let client = app.pool.get().await.unwrap();
    let job = claim::claim(
        &client,
        "w1",
        1,
        Duration::from_millis(1),
        claim::Serves::RulesOnly,
        Lanes::default(),
    )
    .await
    .unwrap()
    .remove(0);
    app.wait_until_lease_expired().await;
    job
}

#[tokio::test]
async fn an_expired_lease_returns_to_the_queue_and_counts_as_an_attempt() {
    let app = spawn_app().await;
    claim_with_expired_lease(&app).await;
    let report = sweep::return_expired_leases(&app.pool, &app.config.worker)
        .await
        .unwrap();
    assert_eq!(
        (report.leases_returned, report.leases_dead_lettered),
        (1, 0)
    );
    let row = app
        .row("SELECT status, attempts, claim_token IS NULL, error_class FROM evaluation_outbox")
        .await;
    assert_eq!(row.get::<_, &str>(0), "pending");
    assert_eq!(row.get::<_, i32>(1), 1);
    assert!(row.get::<_, bool>(2));
    assert_eq!(row.get::<_, &str>(3), "lease_expired");
}

#[tokio::test]
async fn a_job_completed_between_the_sweepers_read_and_write_stays_done() {
    let app = spawn_app().await;
    let job = claim_with_expired_lease(&app).await;
    // The worker's completion holds the row lock when the sweeper's UPDATE reaches the row.
    let mut worker_conn = app.pool.get().await.unwrap();
    let tx = worker_conn.transaction().await.unwrap();
    tx.execute(
        "UPDATE evaluation_outbox SET status = 'done', finished_at = now() WHERE id = $1 AND claim_token = $2",
        &[&job.id.0, &job.claim_token],
    )
    .await
    .unwrap();
    let sweeper = {
        let (pool, policy) = (app.pool.clone(), app.config.worker.clone());
        tokio::spawn(async move { sweep::return_expired_leases(&pool, &policy).await.unwrap() })
    };
    // Wait until the sweeper is really blocked on the worker's row lock.
    app.wait_until(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        |waiting| waiting > 0,
        "the sweeper never reached the locked row",
    )
    .await;
    tx.commit().await.unwrap();
    let report = sweeper.await.unwrap();
    assert_eq!(
        report.leases_returned, 0,
        "the re-check under the lock saw the job done"
    );
    assert_eq!(app.status_counts().await.get("done"), Some(&1));
}

#[tokio::test]
async fn live_leases_are_left_alone() {
    let app = spawn_app().await;
    app.post_ticket("Busy", "body").await;
    let client = app.pool.get().await.unwrap();
    claim::claim(
        &client,
        "w1",
        1,
        Duration::from_secs(60),
        claim::Serves::RulesOnly,
        Lanes::default(),
    )
    .await
    .unwrap();
    let report = sweep::return_expired_leases(&app.pool, &app.config.worker)
        .await
        .unwrap();
    assert_eq!(report, sweep::LeaseReport::default());
    assert_eq!(app.status_counts().await.get("processing"), Some(&1));
}
