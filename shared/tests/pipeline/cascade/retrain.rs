//! The cascade kept fresh (issue 39, item 3): `models switch` answers a configured cascade's
//! new tickets with another stored classifier, without a deploy, audited; `retrain` trains a
//! candidate on the window before the most recent days, judges it on them, and switches only
//! when it keeps the target precision and the local share, saying why when it does not.

use fake_provider::FakeProvider;
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
