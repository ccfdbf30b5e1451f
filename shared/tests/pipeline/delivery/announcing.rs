//! What is announced, and once: a result rolled back or committed, a duplicate arriving
//! after its result, a reprocess result when its version is promoted.

use std::time::Duration;

use serde_json::{json, Value};
use triage::{
    pipeline::outbox::claim::{self, Serves},
    providers::Evaluation,
};

use crate::helpers::webhooks::{ingest, subscribe, Answer, Receiver};

use super::spawn;

#[tokio::test]
async fn a_result_rolled_back_announces_nothing_and_a_committed_one_announces_once() {
    let app = spawn().await;
    let receiver = Receiver::start(|_| Answer::Status(200)).await;
    subscribe(&app, None, &receiver.url).await;
    ingest(&app, None, "Refund please").await;
    let evaluation = Evaluation {
        is_urgent: 0.9,
        department: "billing".into(),
        urgency_score: 0.8,
        answered_by: triage::providers::AnsweredBy::Model,
    };

    let mut client = app.pool.get().await.unwrap();
    let jobs = claim::claim(
        &client,
        "test",
        1,
        Duration::from_secs(30),
        Serves::RulesOnly,
        triage::pipeline::outbox::Lanes::default(),
    )
    .await
    .unwrap();
    let job = &jobs[0];
    let tx = client.transaction().await.unwrap();
    let _ = job.complete(&tx, &evaluation).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(app.count("SELECT count(*) FROM delivery").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM evaluation_result").await, 0);

    let _ = job.complete(&client, &evaluation).await.unwrap();
    assert_eq!(app.count("SELECT count(*) FROM delivery").await, 1);
    drop(client);
    app.deliver_all(Duration::from_secs(10)).await;
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn a_duplicate_arriving_after_the_result_is_announced_with_its_own_event() {
    let app = spawn().await;
    let receiver = Receiver::start(|_| Answer::Status(200)).await;
    subscribe(&app, None, &receiver.url).await;
    let first = ingest(&app, None, "Same content").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    // The job is finished; the same content comes again: no job runs, the result is reused.
    let duplicate = ingest(&app, None, "Same content").await;
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 1);
    app.deliver_all(Duration::from_secs(10)).await;
    let mut expected = vec![first, duplicate.clone()];
    expected.sort();
    assert_eq!(receiver.ticket_ids(), expected);
    assert_eq!(receiver.attempts().len(), 2, "one event id per ticket");
    // The duplicate's event says when it was evaluated as the read side does: not before its
    // own ticket existed, which would tell its sender that someone sent the same text, and when.
    let created: chrono::DateTime<chrono::Utc> = app
        .row(&format!(
            "SELECT created_at FROM ticket WHERE id = '{duplicate}'"
        ))
        .await
        .get(0);
    let computed: chrono::DateTime<chrono::Utc> = app
        .row("SELECT computed_at FROM evaluation_result")
        .await
        .get(0);
    assert!(computed < created, "the result predates the duplicate");
    let event = receiver
        .received()
        .into_iter()
        .map(|r| serde_json::from_str::<Value>(&r.body).unwrap())
        .find(|e| e["data"]["ticket_id"] == duplicate.as_str())
        .unwrap();
    let evaluated_at: chrono::DateTime<chrono::Utc> = event["data"]["evaluated_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(evaluated_at, created, "{event}");
    let shown = app.get_ticket(&duplicate).await.body;
    assert_eq!(
        shown["evaluation"]["evaluated_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        evaluated_at,
        "the event and the read side agree"
    );
}

#[tokio::test]
async fn a_reprocess_result_is_announced_when_its_version_is_promoted() {
    let app = spawn().await;
    let receiver = Receiver::start(|_| Answer::Status(200)).await;
    subscribe(&app, None, &receiver.url).await;
    ingest(&app, None, "Invoice charged twice").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    app.deliver_all(Duration::from_secs(10)).await;
    assert_eq!(receiver.received().len(), 1);

    crate::helpers::operations::op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v4", "spread": "0s"}),
    )
    .await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    assert_eq!(
        app.count("SELECT count(*) FROM delivery").await,
        1,
        "not announced before its promotion"
    );
    let promote = json!({"op": "promote", "prompt_version": "triage-v4", "force": true, "reason": "no eval set in this test"});
    crate::helpers::operations::op(&app, promote.clone()).await;
    crate::helpers::operations::op(&app, promote).await;
    app.deliver_all(Duration::from_secs(10)).await;
    let versions: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| {
            serde_json::from_str::<Value>(&r.body).unwrap()["data"]["prompt_version"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        versions,
        ["triage-v3", "triage-v4"],
        "promoting twice announces once"
    );
}
