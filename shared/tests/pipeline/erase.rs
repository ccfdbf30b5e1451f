//! Erasure (`triage erase`, the ops Lambda's `erase`, the sweeper's ticket retention): a
//! ticket, its links and request keys go in one transaction; what another ticket of the same
//! content still needs stays for it; what nobody refers to any more goes too.

use std::time::Duration;

use fake_provider::FakeProvider;
use serde_json::{json, Value};
use triage::pipeline::sweep;

use crate::{
    helpers::operations::{op, try_op},
    helpers::{spawn_app, spawn_app_with, spawn_app_with_fake, TestApp},
};

const SUBJECT: &str = "Card charged twice";
const MESSAGE: &str = "Order 42 was billed two times.";

async fn post_duplicate(app: &TestApp, request_key: &str) -> String {
    let body = json!({"subject": SUBJECT, "message": MESSAGE}).to_string();
    let created = app.post_json(body, Some(request_key)).await;
    assert_eq!(created.status, 201);
    created.body["id"].as_str().unwrap().to_string()
}

async fn erase(app: &TestApp, ids: &[&str]) -> Value {
    op(app, json!({"op": "erase", "ticket_ids": ids})).await
}

/// Rows anywhere that still hold the content's text or its key.
async fn traces(app: &TestApp, key: &str) -> i64 {
    let client = app.pool.get().await.unwrap();
    let sql = r#"
        SELECT (SELECT count(*) FROM ticket WHERE subject = $1)
             + (SELECT count(*) FROM ticket_evaluation WHERE idempotency_key = $2)
             + (SELECT count(*) FROM evaluation_outbox WHERE idempotency_key = $2)
             + (SELECT count(*) FROM evaluation_result WHERE idempotency_key = $2)
             + (SELECT count(*) FROM provider_call WHERE idempotency_key = $2)
             + (SELECT count(*) FROM request_idempotency)
    "#;
    client
        .query_one(sql, &[&SUBJECT, &key])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn erasing_one_of_two_duplicates_keeps_the_result_for_the_other_and_then_both_leave_no_trace()
{
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let first = post_duplicate(&app, "request-1").await;
    let second = post_duplicate(&app, "request-2").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    let key: String = app
        .row("SELECT idempotency_key FROM evaluation_result")
        .await
        .get(0);

    let erased = erase(&app, &[&first]).await;
    assert_eq!(erased["tickets"], 1, "{erased}");
    assert_eq!(erased["request_keys"], 1, "{erased}");
    assert_eq!(
        erased["results"], 0,
        "the result is still the other ticket's: {erased}"
    );
    assert_eq!(app.get_ticket(&first).await.status, 404);
    let other = app.get_ticket(&second).await.body;
    assert_eq!(other["evaluation"]["status"], "done", "{other}");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM evaluation_result WHERE ticket_id = '{second}'"
        ))
        .await,
        1
    );

    let erased = erase(&app, &[&second]).await;
    assert_eq!(
        (
            erased["tickets"].as_i64(),
            erased["results"].as_i64(),
            erased["ledger_rows"].as_i64()
        ),
        (Some(1), Some(1), Some(1)),
        "{erased}"
    );
    assert_eq!(traces(&app, &key).await, 0, "neither text nor key is left");
    assert_eq!(fake.billed_calls().len(), 1);
}

#[tokio::test]
async fn a_pending_job_whose_ticket_is_erased_is_handed_to_its_duplicate_and_evaluated_once() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let first = post_duplicate(&app, "request-1").await;
    let second = post_duplicate(&app, "request-2").await;
    let erased = erase(&app, &[&first]).await;
    assert_eq!(erased["kept_for_other_tickets"], 1, "{erased}");
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    let shown = app.get_ticket(&second).await.body;
    assert_eq!(shown["evaluation"]["status"], "done", "{shown}");
    assert_eq!(fake.billed_calls().len(), 1);
}

#[tokio::test]
async fn erasing_unknown_tickets_reports_them_and_changes_nothing() {
    let app = spawn_app().await;
    let kept = app.post_ticket("Keep me", "please").await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let unknown = "00000000-0000-4000-8000-000000000001";
    let erased = erase(&app, &[unknown]).await;
    assert_eq!(erased["tickets"], 0);
    assert_eq!(erased["not_found"], json!([unknown]));
    assert_eq!(app.get_ticket(&kept).await.status, 200);
    let bad = serde_json::from_value::<triage::operations::Request>(
        json!({"op": "erase", "ticket_ids": ["not-a-uuid"]}),
    );
    assert!(
        bad.is_err(),
        "a malformed id is refused before anything runs"
    );
    assert!(try_op(&app, json!({"op": "erase", "ticket_ids": [kept]}))
        .await
        .is_ok());
}

#[tokio::test]
async fn the_sweeper_erases_tickets_past_their_retention_in_batches_and_keeps_the_rest() {
    let app = spawn_app_with(|config| {
        config.retention.keep_tickets = Some(Duration::from_secs(3600));
        config.retention.batch_size = 2;
    })
    .await;
    for i in 0..5 {
        app.post_ticket(&format!("Ticket {i}"), "body").await;
    }
    app.exec("UPDATE ticket SET created_at = now() - interval '2 hours' WHERE subject IN ('Ticket 0', 'Ticket 1', 'Ticket 2')").await;
    let report = sweep::sweep(&app.pool, &app.config).await.unwrap();
    assert_eq!(report.tickets_erased, 3);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 2);
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 2);
    assert_eq!(
        sweep::sweep(&app.pool, &app.config)
            .await
            .unwrap()
            .tickets_erased,
        0
    );
}

#[tokio::test]
async fn without_ticket_retention_the_sweeper_erases_nothing() {
    let app = spawn_app().await;
    app.post_ticket("Old", "body").await;
    app.exec("UPDATE ticket SET created_at = now() - interval '3650 days'")
        .await;
    let report = sweep::sweep(&app.pool, &app.config).await.unwrap();
    assert_eq!(report.tickets_erased, 0);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 1);
}

#[tokio::test]
async fn the_reports_counts_follow_erasure_of_duplicates_erased_together() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let ids = [
        post_duplicate(&app, "request-1").await,
        post_duplicate(&app, "request-2").await,
        post_duplicate(&app, "request-3").await,
    ];
    app.post_ticket("Another content", "kept").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(
        (stats["duplicate_tickets"].as_i64(), stats["done"].as_i64()),
        (Some(2), Some(2)),
        "{stats}"
    );

    // Two links of one key in one statement: the key stays (the third ticket has it).
    erase(&app, &[&ids[0], &ids[1]]).await;
    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(
        (stats["duplicate_tickets"].as_i64(), stats["done"].as_i64()),
        (Some(0), Some(2)),
        "{stats}"
    );
    // The last link: the key, its job and its result go.
    erase(&app, &[&ids[2]]).await;
    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(
        (stats["duplicate_tickets"].as_i64(), stats["done"].as_i64()),
        (Some(0), Some(1)),
        "{stats}"
    );
    let counted = app.row("SELECT (SELECT sum(n) FROM report_count WHERE what = 'links')::int8, (SELECT count(*) FROM ticket_evaluation)").await;
    assert_eq!(
        counted.get::<_, i64>(0),
        counted.get::<_, i64>(1),
        "links counted as they are"
    );
}
