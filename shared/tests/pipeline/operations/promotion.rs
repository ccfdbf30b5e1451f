//! Promotion: what GET shows after it, a ticket without a result under the active
//! version, and a version without any result refused.

use fake_provider::FakeProvider;
use serde_json::{json, Value};

use crate::helpers::{
    operations::{op, try_op},
    spawn_app, spawn_app_with_fake, TestApp,
};

use super::{answer, post, reprocess_v4, DRAIN};

async fn shown(app: &TestApp, id: &str) -> Value {
    app.get_ticket(id).await.body["evaluation"].clone()
}

#[tokio::test]
async fn promoting_a_version_changes_what_get_shows_and_the_response_says_so() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    fake.set_default(answer("billing", 0.2));
    let id = post(&app, "Charged twice").await;
    app.drain(&app.worker(), DRAIN).await;
    fake.set_default(answer("technical", 0.8));
    op(&app, reprocess_v4("1h", "0s")).await;
    app.drain(&app.worker(), DRAIN).await;

    let before = shown(&app, &id).await;
    assert_eq!(
        (
            &before["prompt_version"],
            &before["department"],
            &before["shown_because"]
        ),
        (&json!("triage-v3"), &json!("billing"), &json!("configured"))
    );

    let promotion = op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v4", "force": true, "reason": "no eval set in this test"}),
    )
    .await;
    assert_eq!(promotion["model_version"], "gpt-6-luna@medium");
    assert_eq!(promotion["previous"], Value::Null, "the configured version");
    let after = shown(&app, &id).await;
    assert_eq!(
        (
            &after["prompt_version"],
            &after["department"],
            &after["shown_because"]
        ),
        (&json!("triage-v4"), &json!("technical"), &json!("promoted"))
    );
    assert_eq!(after["requested_prompt_version"], "triage-v4");

    // Undoing is promoting the previous version again.
    let undo = op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v3", "force": true, "reason": "no eval set in this test"}),
    )
    .await;
    assert_eq!(undo["previous"]["prompt_version"], "triage-v4");
    let undone = shown(&app, &id).await;
    assert_eq!(
        (&undone["prompt_version"], &undone["shown_because"]),
        (&json!("triage-v3"), &json!("promoted"))
    );
    assert_eq!(
        app.count("SELECT count(*) FROM version_promotion").await,
        2,
        "history"
    );
}

#[tokio::test]
async fn a_ticket_without_a_result_under_the_active_version_shows_its_newest_result() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Evaluated under both").await;
    app.drain(&app.worker(), DRAIN).await;
    op(&app, reprocess_v4("1h", "0s")).await;
    app.drain(&app.worker(), DRAIN).await;
    op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v4", "force": true, "reason": "no eval set in this test"}),
    )
    .await;

    // Ingest keys new tickets under the configured version (v3), not the promoted one.
    let newer = post(&app, "Only under v3").await;
    app.drain(&app.worker(), DRAIN).await;
    let only_v3 = shown(&app, &newer).await;
    assert_eq!(
        (
            &only_v3["status"],
            &only_v3["prompt_version"],
            &only_v3["shown_because"]
        ),
        (&json!("done"), &json!("triage-v3"), &json!("newest"))
    );

    // Queued under v4 but not evaluated yet: the v3 result is still what it shows.
    op(&app, reprocess_v4("1h", "1h")).await;
    let queued = shown(&app, &newer).await;
    assert_eq!(
        (
            &queued["status"],
            &queued["prompt_version"],
            &queued["shown_because"]
        ),
        (&json!("done"), &json!("triage-v3"), &json!("newest"))
    );

    // No result at all: the status of what it is queued under.
    let waiting = post(&app, "Not evaluated yet").await;
    let pending = shown(&app, &waiting).await;
    assert_eq!(
        (
            &pending["status"],
            &pending["requested_prompt_version"],
            &pending["shown_because"]
        ),
        (&json!("pending"), &json!("triage-v3"), &json!("newest"))
    );
}

#[tokio::test]
async fn promote_refuses_a_version_without_any_result() {
    let app = spawn_app().await;
    let error = try_op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v4", "force": true, "reason": "no eval set in this test"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, triage::Error::InvalidRequest(_)), "{error}");
    assert!(
        error.to_string().contains("no evaluation exists"),
        "{error}"
    );
    assert_eq!(app.count("SELECT count(*) FROM version_promotion").await, 0);
}
