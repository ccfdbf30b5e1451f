//! The cascade kept fresh (issue 39, item 3): `models switch` answers a configured cascade's
//! new tickets with another stored classifier, without a deploy, audited; `retrain` trains a
//! candidate on the window before the most recent days, judges it on them, and switches only
//! when it keeps the target precision and the local share, saying why when it does not.

use std::time::Duration;

use fake_provider::{classifier::Classifier, FakeProvider};
use serde_json::{json, Value};
use triage::Error;

use super::{configured, retire::distilled, trained};
use crate::helpers::{
    operations::{op, try_op},
    spawn_app_with_fake, TestApp,
};

fn switch(version: &str, reason: &str) -> Value {
    json!({"op": "models", "action": {"switch": {"version": version, "reason": reason}}})
}

/// The model version the newest job of `subject` is queued under.
async fn queued_under(app: &TestApp, subject: &str) -> String {
    app.row(&format!(
        "SELECT o.model_version FROM evaluation_outbox o JOIN ticket t ON t.id = o.ticket_id \
         WHERE t.subject = '{subject}' ORDER BY o.id DESC LIMIT 1"
    ))
    .await
    .get(0)
}

#[tokio::test]
async fn a_switch_keys_new_tickets_under_the_classifier_switched_to_and_keeps_it_from_retirement() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let (first, _) = trained(&app, "shipped").await;
    let second = distilled(&app).await;
    let cascade = |local: &str| format!("cascade({local},0.9,gpt-6-luna@medium)");
    let app = configured(&app, &cascade(&first), |_| {});

    assert_eq!(app.post_ticket("before", "a ticket").await.status, 201);
    assert_eq!(queued_under(&app, "before").await, cascade(&first));

    // Refused, changing nothing: a classifier that is not stored.
    let refused = try_op(&app, switch("local-0123456789ab", "typo")).await;
    assert!(
        matches!(refused, Err(Error::InvalidRequest(_))),
        "{refused:?}"
    );

    let switched = op(&app, switch(&second, "incident 7: back to the desk's")).await;
    assert_eq!(switched["local_version"], second.as_str(), "{switched}");
    assert_eq!(switched["previous"], Value::Null, "{switched}");
    assert_eq!(app.post_ticket("after", "a ticket").await.status, 201);
    assert_eq!(queued_under(&app, "after").await, cascade(&second));
    let audited = app
        .count(
            "SELECT count(*) FROM operation_audit WHERE op = 'models' AND status = 'ok' \
             AND parameters->'action'->'switch'->>'reason' = 'incident 7: back to the desk''s'",
        )
        .await;
    assert_eq!(audited, 1, "the switch is audited with its reason");

    // The classifier it answers with is live: not retired while it is switched to.
    let refused = try_op(
        &app,
        json!({"op": "models", "action": {"retire": {"version": second}}}),
    )
    .await;
    match refused {
        Err(Error::InvalidRequest(why)) => assert!(why.to_string().contains("switched"), "{why}"),
        other => panic!("not refused: {other:?}"),
    }
    // A switch back is a switch like another, naming the one it replaces.
    let back = op(&app, switch(&first, "rollback")).await;
    assert_eq!(back["previous"], second.as_str(), "{back}");
    assert_eq!(app.post_ticket("back", "a ticket").await.status, 201);
    assert_eq!(queued_under(&app, "back").await, cascade(&first));
}

const SHIPPED_SET: &str = include_str!("../../../../evals/tickets.jsonl");

/// The shipped set's rows, as tickets: every third one `recent`, the others not. A family's
/// variants fall on both sides, as a desk's recurring requests do.
fn rows(recent: bool) -> Vec<(String, String)> {
    SHIPPED_SET
        .lines()
        .enumerate()
        .filter(|(i, _)| i.is_multiple_of(3) == recent)
        .map(|(_, line)| {
            let row = serde_json::from_str::<Value>(line).unwrap();
            let text = |f: &str| row[f].as_str().unwrap().to_string();
            (text("subject"), text("message"))
        })
        .collect()
}

/// Production traffic the large model answered as the desk would (the set's labels): two
/// thirds of it ten days ago, the rest yesterday.
async fn traffic(app: &TestApp) {
    for (recent, days_ago) in [(false, 10), (true, 1)] {
        app.ingest_many(&rows(recent)).await;
        app.drain(&app.worker(), Duration::from_secs(60)).await;
        age(app, days_ago).await;
    }
}

/// The desk's labels (the set's) for every recent ticket: the truth the switch gate judges
/// precision by (the large model's answers on tickets no audit drew are not one).
async fn desk_labels_recent(app: &TestApp) {
    let mut items = Vec::new();
    for line in SHIPPED_SET.lines().step_by(3) {
        let row = serde_json::from_str::<Value>(line).unwrap();
        let client = app.pool.get().await.unwrap();
        let ids = client
            .query(
                "SELECT id FROM ticket WHERE subject = $1 AND message = $2",
                &[&row["subject"].as_str(), &row["message"].as_str()],
            )
            .await
            .unwrap();
        for id in ids {
            let id: uuid::Uuid = id.get(0);
            items.push(json!({"ticket_id": id, "department": row["department"],
                              "is_urgent": row["is_urgent"]}));
        }
    }
    op(app, json!({"op": "feedback", "items": items})).await;
}

/// What was answered in the last hour, moved `days_ago` days back.
async fn age(app: &TestApp, days_ago: i32) {
    app.exec(&format!(
        "UPDATE evaluation_result SET computed_at = now() - interval '{days_ago} days' \
         WHERE computed_at > now() - interval '1 hour';
         UPDATE ticket SET created_at = now() - interval '{days_ago} days' \
         WHERE created_at > now() - interval '1 hour';"
    ))
    .await;
}

fn retrain() -> Value {
    json!({"op": "retrain", "days": 30, "holdout_days": 3})
}

#[tokio::test]
async fn retrain_switches_to_a_candidate_that_keeps_the_target_and_keeps_out_one_that_does_not() {
    let fake = FakeProvider::start().await;
    fake.classify_from_labels(Classifier::from_jsonl(SHIPPED_SET, 0.0).unwrap());
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    traffic(&app).await;
    // The live classifier: no thresholds derived for any target, so it answers nothing
    // locally under one (as a cascade configured before its first retrain).
    let (live, _) = trained(&app, "shipped").await;
    let stored = || app.count("SELECT count(*) FROM local_model");
    let before = stored().await;

    // A target the recent traffic cannot be answered at: kept out, saying why, nothing stored.
    let strict = configured(
        &app,
        &format!("cascade({live},p0.999,gpt-6-luna@medium)"),
        |_| {},
    );
    let kept_out = op(&strict, retrain()).await;
    assert_eq!(kept_out["switched"], false, "{kept_out}");
    assert_eq!(kept_out["live"], live.as_str(), "{kept_out}");
    assert_eq!(kept_out["failing_runs"], 1, "{kept_out}");
    let reason = kept_out["reason"].as_str().unwrap();
    assert!(
        reason.contains("below the target") || reason.contains("local answers in the window"),
        "{reason}"
    );
    assert_eq!(stored().await, before, "a candidate kept out is not stored");
    assert_eq!(app.count("SELECT count(*) FROM cascade_switch").await, 0);

    // A target it keeps, judged on yesterday's tickets, which it did not learn: without a truth
    // but the large model's own answers, kept out; with the desk's labels, switched.
    let cascade = |local: &str| format!("cascade({local},p0.8,gpt-6-luna@medium)");
    let app = configured(&app, &cascade(&live), |_| {});
    let unjudged = op(&app, retrain()).await;
    assert_eq!(unjudged["switched"], false, "{unjudged}");
    let reason = unjudged["reason"].as_str().unwrap();
    assert!(reason.contains("with a desk or audit truth"), "{reason}");
    desk_labels_recent(&app).await;
    let switched = op(&app, retrain()).await;
    assert_eq!(switched["switched"], true, "{switched}");
    assert_eq!(switched["failing_runs"], 0, "{switched}");
    let candidate = switched["candidate"].as_str().unwrap().to_string();
    assert_ne!(candidate, live);
    let (old, recent) = (rows(false).len() as i64, rows(true).len() as i64);
    assert_eq!(switched["judged"], recent, "{switched}");
    assert!(
        switched["candidate_precision"].as_f64().unwrap() >= 0.8,
        "{switched}"
    );
    assert!(
        switched["candidate_local_share"].as_f64().unwrap() > 0.0,
        "{switched}"
    );
    // Stored as `train` stores one: its thresholds, and the tickets it learnt (for erasure):
    // the older ones only.
    let of = |table: &str| format!("SELECT count(*) FROM {table} WHERE version = '{candidate}'");
    assert_eq!(app.count(&of("local_model_target")).await, 1);
    assert_eq!(app.count(&of("local_model_ticket")).await, old);
    // New tickets are keyed under the cascade answered by the candidate.
    assert_eq!(app.post_ticket("fresh", "a ticket").await.status, 201);
    assert_eq!(queued_under(&app, "fresh").await, cascade(&candidate));
    // Each run audited with its outcome and reason.
    let audited = app
        .count(
            "SELECT count(*) FROM operation_audit WHERE op = 'retrain' AND status = 'ok' \
             AND result ? 'reason'",
        )
        .await;
    assert_eq!(audited, 3);
}

#[tokio::test]
async fn the_live_classifiers_share_counts_the_tickets_its_cascade_answered_itself() {
    let fake = FakeProvider::start().await;
    fake.classify_from_labels(Classifier::from_jsonl(SHIPPED_SET, 0.0).unwrap());
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    // The older traffic through the large model; a classifier learnt from it, with thresholds.
    app.ingest_many(&rows(false)).await;
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    let trained = op(
        &app,
        json!({"op": "train", "from": ["results:1"], "precision": 0.8}),
    )
    .await;
    let live = trained["version"].as_str().unwrap().to_string();
    age(&app, 10).await;
    // The recent traffic through the cascade: its classifier answers what it is sure of itself,
    // so those tickets have no large model's answer.
    let app = configured(
        &app,
        &format!("cascade({live},p0.8,gpt-6-luna@medium)"),
        |_| {},
    );
    app.ingest_many(&rows(true)).await;
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    age(&app, 1).await;
    let answered_locally = app
        .count("SELECT count(*) FROM evaluation_result WHERE answered_by = 'local'")
        .await;
    assert!(answered_locally > 0, "the cascade answered some itself");

    let run = op(&app, retrain()).await;
    let recent = rows(true).len() as f64;
    // Judged over the window's every ticket: the live classifier's own answers count.
    let share = run["live_local_share"].as_f64().unwrap();
    assert!(
        share >= answered_locally as f64 / recent - 1e-9,
        "{share} of {recent} tickets, {answered_locally} answered locally: {run}"
    );
}
