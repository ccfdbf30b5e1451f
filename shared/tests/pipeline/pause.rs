//! An operator's pause (`triage pause` / `resume`, the ops Lambda): the worker claims nothing
//! from a paused lane and the deliverer delivers nothing while deliveries are paused, from the
//! next invocation, with no deploy; jobs wait with no attempt spent, the queue's age does not
//! count them (the pause has its own metric), `stats` lists what is paused, and resuming
//! drains what waited. Both commands are in the audit trail.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{
    helpers::operations::{op, try_op},
    helpers::webhooks::{fast_delivery, subscribe, Answer, Receiver},
    helpers::{spawn_app_with, TestApp},
    lanes::batch_app,
};

async fn pending_untouched(app: &TestApp, lane: &str) -> i64 {
    app.count(&format!(
        "SELECT count(*) FROM evaluation_outbox \
         WHERE lane = '{lane}' AND status = 'pending' AND attempts = 0"
    ))
    .await
}

async fn post(app: &TestApp, prefix: &str, n: usize) {
    for i in 0..n {
        let created = app.post_ticket(&format!("{prefix} {i}"), "body").await;
        assert_eq!(created.status, 201);
    }
}

#[tokio::test]
async fn a_paused_lane_is_not_claimed_from_until_it_is_resumed_and_both_are_audited() {
    let app = spawn_app_with(fast_delivery).await;
    post(&app, "bulk", 2).await;
    app.exec("UPDATE evaluation_outbox SET lane = 'bulk'").await;
    post(&app, "new", 3).await;
    // Made to look old: the age alarm's metric must not count a paused lane's wait.
    app.exec("UPDATE evaluation_outbox SET available_at = now() - interval '1 hour' WHERE lane = 'interactive'")
        .await;

    let paused = op(
        &app,
        json!({"op": "pause", "lane": "interactive", "reason": "incident 42"}),
    )
    .await;
    assert_eq!(paused["paused"][0]["lane"], "interactive", "{paused}");
    assert_eq!(paused["paused"][0]["reason"], "incident 42");
    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["paused"], json!(["interactive"]));
    assert_eq!(stats["pending"], 5);
    assert!(
        stats["oldest_pending_age_seconds"].as_f64().unwrap() < 60.0,
        "the paused lane's hour-old jobs are not the queue's age: {stats}"
    );

    // The bulk lane still runs; the interactive one waits, no attempt spent.
    let worker = app.worker();
    let report = app.run_worker_once(&worker).await;
    assert_eq!(report.claimed, 2, "{report:?}");
    assert_eq!(pending_untouched(&app, "interactive").await, 3);
    assert_eq!(pending_untouched(&app, "bulk").await, 0);
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'done'")
            .await,
        2
    );

    let resumed = op(&app, json!({"op": "resume", "lane": "interactive"})).await;
    assert_eq!(resumed["paused"], json!([]));
    assert_eq!(op(&app, json!({"op": "stats"})).await["paused"], json!([]));
    app.drain(&worker, Duration::from_secs(10)).await;
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'done'")
            .await,
        5,
        "drained once resumed"
    );

    let audit = op(&app, json!({"op": "audit"})).await;
    let ops: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["op"].as_str().unwrap())
        .collect();
    assert!(ops.contains(&"pause") && ops.contains(&"resume"), "{ops:?}");
    let pause = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["op"] == "pause")
        .unwrap();
    assert_eq!(pause["parameters"]["lane"], "interactive");
    assert_eq!(pause["status"], "ok", "{pause}");
    assert!(pause["principal"].as_str().unwrap().starts_with("lambda "));
}

#[tokio::test]
async fn pausing_without_a_lane_stops_the_worker_and_the_deliverer_and_resuming_drains_both() {
    let app = spawn_app_with(fast_delivery).await;
    let receiver = Receiver::start(|_| Answer::Status(204)).await;
    subscribe(&app, None, &receiver.url).await;
    post(&app, "first", 2).await;
    let worker = app.worker();
    app.drain(&worker, Duration::from_secs(10)).await;
    let waiting = "SELECT count(*) FROM delivery WHERE status = 'pending'";
    assert_eq!(app.count(waiting).await, 2);

    let paused = op(&app, json!({"op": "pause"})).await;
    assert_eq!(paused["paused"].as_array().unwrap().len(), 3, "{paused}");
    assert_eq!(
        op(&app, json!({"op": "stats"})).await["paused"],
        json!(["interactive", "bulk", "deliveries"])
    );
    post(&app, "second", 2).await;
    let report = app.run_worker_once(&worker).await;
    assert_eq!(report.claimed, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let delivered = app
        .deliverer()
        .run_invocation(deadline, &CancellationToken::new())
        .await
        .unwrap();
    assert!(delivered.paused);
    assert_eq!(delivered.claimed, 0);
    assert!(receiver.received().is_empty());
    assert_eq!(app.count(waiting).await, 2);
    assert_eq!(pending_untouched(&app, "interactive").await, 2);

    // Pausing again keeps the first pause's time, author and reason.
    let again = op(
        &app,
        json!({"op": "pause", "lane": "bulk", "reason": "later"}),
    )
    .await;
    assert_eq!(again["paused"], paused["paused"]);

    op(&app, json!({"op": "resume"})).await;
    app.drain(&worker, Duration::from_secs(10)).await;
    app.deliver_all(Duration::from_secs(10)).await;
    assert_eq!(
        receiver.ticket_ids().len(),
        4,
        "every result delivered once resumed"
    );
}

#[tokio::test]
async fn a_paused_bulk_lane_sends_no_provider_batch_but_collects_the_one_sent() {
    let fake = fake_provider::FakeProvider::start().await;
    let app = batch_app(&fake, fake_provider::Api::OpenAi, None).await;
    let worker = app.worker();
    let soon = || Instant::now() + Duration::from_secs(5);
    op(&app, json!({"op": "pause", "lane": "bulk"})).await;
    let report = worker.tend_batches(soon()).await.unwrap();
    assert_eq!(report.submitted, 0);
    assert!(fake.batches().is_empty());
    assert_eq!(pending_untouched(&app, "bulk").await, 3);

    op(&app, json!({"op": "resume", "lane": "bulk"})).await;
    fake.set_batch_delay(Duration::from_secs(3600));
    assert_eq!(worker.tend_batches(soon()).await.unwrap().submitted, 1);
    // Paused while the batch runs: it is still collected once it ends (its answers are paid).
    op(&app, json!({"op": "pause", "lane": "bulk"})).await;
    fake.set_batch_delay(Duration::ZERO);
    let report = worker.tend_batches(soon()).await.unwrap();
    assert_eq!((report.collected, report.lines_evaluated), (1, 3));
}

#[tokio::test]
async fn an_unknown_lane_is_refused_and_pauses_nothing() {
    let app = spawn_app_with(fast_delivery).await;
    for lane in ["all", "Bulk", "delivery"] {
        let request = serde_json::from_value::<triage::operations::Request>(
            json!({"op": "pause", "lane": lane}),
        );
        let error = request.unwrap_err().to_string();
        assert!(
            error.contains("interactive, bulk or deliveries"),
            "{lane}: {error}"
        );
    }
    assert!(try_op(&app, json!({"op": "resume"})).await.is_ok());
    assert_eq!(app.count("SELECT count(*) FROM pause").await, 0);
}
