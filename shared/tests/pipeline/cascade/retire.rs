//! Erasure reaches what was learnt (issue 39, item 6): each classifier records its training
//! window; `models retire VERSION` removes one, audited, refused while a live cascade (the
//! configured model version, the promoted one) names it; after it, no erasure names it, and
//! a job still queued under it is dead-lettered `unknown_local_model`, in a warm process too.

use std::time::Duration;

use chrono::{DateTime, Utc};
use fake_provider::FakeProvider;
use serde_json::{json, Value};
use triage::pipeline::cascade::models;

use super::{configured, trained};
use crate::{
    helpers::operations::{op, try_op},
    helpers::{spawn_app_with_fake, TestApp},
};

fn tickets() -> Vec<(String, String)> {
    (0..8)
        .map(|i| {
            (
                format!("Order {i} arrived broken"),
                format!("The parcel for order {i} came crushed, please send another one."),
            )
        })
        .collect()
}

/// A classifier distilled from the model's answers of the last day, to the tickets ingested.
pub(super) async fn distilled(app: &TestApp) -> String {
    app.ingest_many(&tickets()).await;
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let trained = op(app, json!({"op": "train", "from": ["results:1"]})).await;
    assert_eq!(trained["examples"], 8, "{trained}");
    trained["version"].as_str().unwrap().to_string()
}

fn retire(version: &str) -> Value {
    json!({"op": "models", "action": {"retire": {"version": version}}})
}

async fn listed(app: &TestApp) -> Vec<Value> {
    op(app, json!({"op": "models"}))
        .await
        .as_array()
        .unwrap()
        .clone()
}

async fn refusal(app: &TestApp, version: &str) -> String {
    match try_op(app, retire(version)).await {
        Err(triage::Error::InvalidRequest(refused)) => refused.to_string(),
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn each_classifier_records_its_training_window_and_a_set_only_one_has_none() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let before: DateTime<Utc> = app.row("SELECT now()").await.get(0);
    let from_results = distilled(&app).await;
    let (from_set, _) = trained(&app, "shipped").await;
    let both = op(
        &app,
        json!({"op": "train", "from": ["set:shipped:dev", "results:1", "feedback:3"]}),
    )
    .await;
    let after: DateTime<Utc> = app.row("SELECT now()").await.get(0);

    let models = listed(&app).await;
    let of = |version: &str| {
        models
            .iter()
            .find(|m| m["version"] == version)
            .unwrap_or_else(|| panic!("{version} listed: {models:?}"))
            .clone()
    };
    let time = |v: &Value| v.as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
    let day = chrono::Duration::days(1);
    let window = of(&from_results);
    let (from, until) = (
        time(&window["trained_from"]),
        time(&window["trained_until"]),
    );
    assert!(
        before - day <= from && from <= after - day,
        "one day back from the read: {window}"
    );
    assert!(
        from + day <= until && until <= after,
        "until stored: {window}"
    );
    let window = of(both["version"].as_str().unwrap());
    let from = time(&window["trained_from"]);
    assert!(
        before - day * 3 <= from && from <= after - day * 3,
        "the longest source's days: {window}"
    );
    let window = of(&from_set);
    assert_eq!(
        (&window["trained_from"], &window["trained_until"]),
        (&Value::Null, &Value::Null),
        "a labelled set is no production data: {window}"
    );
}

#[tokio::test]
async fn retiring_a_classifier_removes_it_and_what_it_learnt_from_is_audited_and_no_erasure_names_it_again(
) {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let version = distilled(&app).await;
    let (kept, _) = trained(&app, "shipped").await;
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM local_model_ticket WHERE version = '{version}'"
        ))
        .await,
        8
    );

    let retired = op(&app, retire(&version)).await;
    assert_eq!(retired["version"], version.as_str(), "{retired}");
    assert_eq!(retired["tickets"], 8, "{retired}");
    assert_eq!(retired["queued_jobs"], 0, "{retired}");
    assert!(retired["bytes"].as_i64().unwrap() > 0, "{retired}");
    let left: Vec<Value> = listed(&app).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["version"], kept.as_str());
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM local_model_ticket WHERE version = '{version}'"
        ))
        .await,
        0,
        "its record of the tickets went with it"
    );

    // Audited like every operation: who, what, and what it did.
    let trail = op(&app, json!({"op": "audit", "limit": 3})).await;
    let row = trail
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["parameters"]["action"]["retire"]["version"] == version.as_str())
        .unwrap_or_else(|| panic!("retire audited: {trail}"))
        .clone();
    assert_eq!(
        (&row["op"], &row["status"]),
        (&json!("models"), &json!("ok"))
    );
    assert_eq!(row["result"]["tickets"], 8, "{row}");

    // An erasure of a ticket it learnt from names it no more.
    let id: String = app
        .row("SELECT id::text FROM ticket ORDER BY created_at LIMIT 1")
        .await
        .get(0);
    let erased = op(&app, json!({"op": "erase", "ticket_ids": [id]})).await;
    assert_eq!(erased["tickets"], 1);
    assert_eq!(erased["classifiers_trained_on"], json!([]), "{erased}");

    // Retired already, or never trained: refused naming it.
    let again = refusal(&app, &version).await;
    assert!(
        again.contains(&version) && again.contains("not a stored"),
        "{again}"
    );
    let unknown = refusal(&app, "local-0123456789ab").await;
    assert!(unknown.contains("local-0123456789ab"), "{unknown}");
    let trail = op(&app, json!({"op": "audit", "limit": 2})).await;
    assert_eq!(trail[1]["status"], "refused", "{trail}");
}

#[tokio::test]
async fn a_classifier_the_configured_or_promoted_cascade_names_is_not_retired_and_nothing_changes()
{
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let version = distilled(&app).await;
    let cascade = format!("cascade({version},0.9,gpt-6-luna@medium)");
    let stored = || async {
        (
            app.count(&format!(
                "SELECT count(*) FROM local_model WHERE version = '{version}'"
            ))
            .await,
            app.count(&format!(
                "SELECT count(*) FROM local_model_ticket WHERE version = '{version}'"
            ))
            .await,
        )
    };

    let under_cascade = configured(&app, &cascade, |_| {});
    let why = refusal(&under_cascade, &version).await;
    assert!(
        why.contains("configured") && why.contains("TRIAGE_MODEL") && why.contains(&version),
        "{why}"
    );
    assert_eq!(stored().await, (1, 8), "nothing changed");

    // The version readers see, promoted last, names it too.
    app.exec(&format!(
        "INSERT INTO version_promotion (prompt_version, model_version) \
         VALUES ('triage-v5', '{cascade}')"
    ))
    .await;
    let why = refusal(&app, &version).await;
    assert!(why.contains("promoted") && why.contains(&version), "{why}");
    assert_eq!(stored().await, (1, 8), "nothing changed");

    // Once another version is promoted, it goes.
    app.exec(
        "INSERT INTO version_promotion (prompt_version, model_version) \
         VALUES ('triage-v5', 'gpt-6-luna@medium')",
    )
    .await;
    op(&app, retire(&version)).await;
    assert_eq!(stored().await, (0, 0));
}

#[tokio::test]
async fn a_job_queued_under_a_retired_classifier_is_dead_lettered_in_a_warm_process_too() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let client = app.pool.get().await.unwrap();
    // A process that loaded a classifier (as a warm worker has) uses it no more once another
    // process has retired it (here its row is deleted by hand, as that retire does).
    let elsewhere = distilled(&app).await;
    assert!(models::load(&client, &elsewhere).await.unwrap().is_some());
    app.exec(&format!(
        "DELETE FROM local_model WHERE version = '{elsewhere}'"
    ))
    .await;
    assert!(models::load(&client, &elsewhere).await.unwrap().is_none());

    let (version, _) = trained(&app, "shipped").await;
    let cascade = format!("cascade({version},0.5,gpt-6-luna@medium)");
    let under_cascade = configured(&app, &cascade, |_| {});
    under_cascade.ingest_many(&tickets()).await;
    let calls_before = fake.billed_calls().len();

    // Retired by an operator whose configuration names another model.
    let retired = op(&app, retire(&version)).await;
    assert_eq!(retired["queued_jobs"], 8, "{retired}");
    assert!(models::load(&client, &version).await.unwrap().is_none());

    under_cascade
        .drain(&under_cascade.worker(), Duration::from_secs(20))
        .await;
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'dead' \
             AND error_class = 'unknown_local_model' AND model_version = '{cascade}'"
        ))
        .await,
        8
    );
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM evaluation_result WHERE model_version = '{cascade}'"
        ))
        .await,
        0
    );
    assert_eq!(
        fake.billed_calls().len(),
        calls_before,
        "no call made for them"
    );
}
