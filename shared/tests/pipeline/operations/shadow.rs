//! The shadow diff: agreement, confusion and the largest disagreements after a reprocess,
//! and nothing compared between versions without common tickets.

use fake_provider::FakeProvider;
use serde_json::{json, Value};

use crate::helpers::{operations::op, spawn_app, spawn_app_with_fake, TestApp};

use super::{answer, reprocess_v4, tickets, DRAIN};

#[tokio::test]
async fn shadow_diff_after_reprocess_shows_agreement_confusion_and_the_largest_disagreements() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    fake.set_default(answer("billing", 0.2));
    let mut input = tickets("steady", 4);
    for subject in ["to technical", "to sales", "more urgent"] {
        input.push((subject.to_string(), "message".to_string()));
    }
    app.ingest_many(&input).await;
    app.drain(&app.worker(), DRAIN).await;
    // The "new prompt" changes its mind on three tickets.
    fake.when_contains("to technical", answer("technical", 0.9));
    fake.when_contains("to sales", answer("sales", 0.3));
    fake.when_contains("more urgent", answer("billing", 0.95));
    op(&app, reprocess_v4("1h", "0s")).await;
    app.drain(&app.worker(), DRAIN).await;

    let diff = op(
        &app,
        json!({"op": "shadow_diff", "from": "triage-v3/gpt-6-luna@medium", "to": "triage-v4"}),
    )
    .await;
    assert_eq!(diff["compared"], 7);
    assert_eq!(diff["to"]["model_version"], "gpt-6-luna@medium");
    let agreement = diff["department_agreement"].as_f64().unwrap();
    assert!((agreement - 5.0 / 7.0).abs() < 1e-9, "{agreement}");
    assert_eq!(
        diff["confusion"],
        json!([
            {"from": "billing", "to": "billing", "count": 5},
            {"from": "billing", "to": "sales", "count": 1},
            {"from": "billing", "to": "technical", "count": 1},
        ])
    );
    let u = &diff["urgency_diff"];
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(
        close(&u["min"], 0.0) && close(&u["p50"], 0.0) && close(&u["max"], 0.75),
        "{u}"
    );
    let histogram: Vec<i64> = u["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_i64().unwrap())
        .collect();
    assert_eq!(histogram, [0, 0, 0, 4, 1, 0, 2]);

    let subjects = ticket_subjects(&app).await;
    let largest: Vec<&str> = diff["largest_disagreements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| subjects[d["ticket_id"].as_str().unwrap()].as_str())
        .collect();
    assert_eq!(largest, ["to technical", "to sales", "more urgent"]);
}

async fn ticket_subjects(app: &TestApp) -> std::collections::HashMap<String, String> {
    let client = app.pool.get().await.unwrap();
    client
        .query("SELECT id::text, subject FROM ticket", &[])
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[tokio::test]
async fn shadow_diff_of_versions_without_common_tickets_compares_nothing() {
    let app = spawn_app().await;
    let diff = op(
        &app,
        json!({"op": "shadow_diff", "from": "triage-v3", "to": "triage-v4"}),
    )
    .await;
    assert_eq!(diff["compared"], 0);
    assert_eq!(diff["department_agreement"], Value::Null);
    assert_eq!(diff["urgency_diff"]["histogram"], json!([]));
}
