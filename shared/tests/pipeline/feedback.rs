//! The help desk's feedback (`POST /tickets/{id}/feedback`, the ops Lambda's `feedback`) and
//! live agreement: exact figures in `triage stats` from the running totals, a correction
//! replaces the earlier labels (history kept), only the ticket's reader may label it, bad
//! input changes nothing, and erasure takes feedback and its share of the totals with it.

use std::time::Duration;

use axum::{body::Body, http::Request};
use fake_provider::FakeProvider;
use serde_json::{json, Value};

use crate::{
    helpers::gateway::{iam, jwt, send},
    helpers::operations::{op, try_op},
    helpers::{spawn_app_with_fake, Response, TestApp},
};

pub(crate) async fn give(app: &TestApp, id: &str, body: Value) -> Response {
    let request = Request::post(format!("/tickets/{id}/feedback"))
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    app.request(request).await
}

/// Posts `n` tickets, evaluates them, and answers each one's id with the department the
/// model gave it.
pub(crate) async fn evaluated(app: &TestApp, n: usize) -> Vec<(String, String, f64)> {
    let mut ids = Vec::new();
    for i in 0..n {
        let created = app
            .post_ticket(&format!("Desk ticket {i}"), "please look")
            .await;
        ids.push(created.body["id"].as_str().unwrap().to_string());
    }
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    let mut answered = Vec::new();
    for id in ids {
        let row = app
            .row(&format!(
                "SELECT r.department, r.is_urgent FROM ticket_evaluation te \
                 JOIN evaluation_result r USING (idempotency_key) WHERE te.ticket_id = '{id}'"
            ))
            .await;
        answered.push((id, row.get(0), row.get(1)));
    }
    answered
}

pub(crate) fn other(department: &str) -> &'static str {
    if department == "billing" {
        "technical"
    } else {
        "billing"
    }
}

fn week(stats: &Value) -> Value {
    stats["agreement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["window_days"] == 7)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_feedback_round_trip_gives_exact_agreement_and_a_correction_replaces_it() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let answers = evaluated(&app, 4).await;
    // The desk agrees on the department of the first three and not the fourth; it calls the
    // first urgent and the second not.
    let mut desk_urgent = Vec::new();
    for (i, (id, department, score)) in answers.iter().enumerate() {
        let department = if i < 3 {
            department.as_str()
        } else {
            other(department)
        };
        let urgent = match i {
            0 => true,
            1 => false,
            _ => *score >= 0.5,
        };
        desk_urgent.push(urgent);
        let given = give(
            &app,
            id,
            json!({"department": department, "is_urgent": urgent}),
        )
        .await;
        assert_eq!(given.status, 200, "{:?}", given.body);
        assert_eq!(given.body["replaced"], false);
        assert_eq!(given.body["versions_matched"], 1);
    }
    let predicted: Vec<bool> = answers.iter().map(|(_, _, s)| *s >= 0.5).collect();
    let tp = (0..4).filter(|&i| predicted[i] && desk_urgent[i]).count() as f64;
    let fp = (0..4).filter(|&i| predicted[i] && !desk_urgent[i]).count() as f64;
    let fn_ = (0..4).filter(|&i| !predicted[i] && desk_urgent[i]).count() as f64;

    let stats = op(&app, json!({"op": "stats"})).await;
    let agreement = stats["agreement"].as_array().unwrap();
    assert_eq!(agreement.len(), 2, "7 and 30 days: {stats}");
    for a in agreement {
        assert_eq!(a["prompt_version"], app.config.versions.prompt.as_str());
        assert_eq!(a["model_version"], app.config.versions.model.as_str());
        assert_eq!(a["n"], 4);
        assert_eq!(a["department_accuracy"], 0.75);
        let share = |part: f64, whole: f64| {
            if whole > 0.0 {
                json!(part / whole)
            } else {
                Value::Null
            }
        };
        assert_eq!(a["urgent_precision"], share(tp, tp + fp), "{a}");
        assert_eq!(a["urgent_recall"], share(tp, tp + fn_), "{a}");
    }

    // The desk corrects the fourth: it agrees after all. Replaced, history kept.
    let (id, department, _) = &answers[3];
    let corrected = give(
        &app,
        id,
        json!({"department": department, "is_urgent": desk_urgent[3]}),
    )
    .await;
    assert_eq!(
        (corrected.status, &corrected.body["replaced"]),
        (200, &json!(true))
    );
    assert_eq!(
        week(&op(&app, json!({"op": "stats"})).await)["department_accuracy"],
        1.0
    );
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM ticket_feedback WHERE ticket_id = '{id}'"
        ))
        .await,
        2,
        "the earlier labels stay as history"
    );
    // And corrects it back: the totals follow each correction exactly.
    give(
        &app,
        id,
        json!({"department": other(department), "is_urgent": desk_urgent[3]}),
    )
    .await;
    let week = week(&op(&app, json!({"op": "stats"})).await);
    assert_eq!(
        (&week["n"], &week["department_accuracy"]),
        (&json!(4), &json!(0.75))
    );

    // The console's Quality page shows the same figures beside the offline runs.
    let page = crate::console::console_page(&app, "/admin/quality").await;
    let version = format!("7:{}", app.config.versions.pair());
    assert!(
        page.contains(&format!(r#"data-agreement="{version}""#)),
        "{page}"
    );
    assert!(
        page.contains(r#"data-stat="department_accuracy">0.750<"#),
        "{page}"
    );
}

#[tokio::test]
async fn only_the_tickets_reader_labels_it_with_the_scope_and_bad_input_changes_nothing() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let alice = iam("arn:aws:iam::123456789012:user/alice");
    let body = json!({"subject": "Refund", "message": "charged twice"}).to_string();
    let mut post = testkit::lambda::events::http_api("POST", "/tickets", Some(&body));
    post["requestContext"]["authorizer"] = alice.clone();
    let (status, created) = send(&app, post.to_string()).await;
    assert_eq!(status, 201);
    let id = created["id"].as_str().unwrap();
    let labels = json!({"department": "billing", "is_urgent": true}).to_string();
    let feedback = |authorizer: Value| {
        let mut event = testkit::lambda::events::http_api(
            "POST",
            &format!("/tickets/{id}/feedback"),
            Some(&labels),
        );
        event["requestContext"]["authorizer"] = authorizer;
        event.to_string()
    };
    let bob = iam("arn:aws:iam::123456789012:user/bob");
    assert_eq!(
        send(&app, feedback(bob)).await.0,
        404,
        "like every ticket route"
    );
    let mut scopeless = jwt("https://issuer.example", "desk");
    scopeless["jwt"]["scopes"] = json!(["triage/tickets.write"]);
    assert_eq!(send(&app, feedback(scopeless)).await.0, 403);
    assert_eq!(app.count("SELECT count(*) FROM ticket_feedback").await, 0);
    assert_eq!(send(&app, feedback(alice)).await.0, 200);

    for (body, status) in [
        (json!({"department": "legal", "is_urgent": true}), 422),
        (json!({"department": "billing"}), 422),
        (json!({"department": "billing", "is_urgent": "yes"}), 422),
        (
            json!({"department": "billing", "is_urgent": true, "note": "x"}),
            422,
        ),
    ] {
        let refused = give(&app, id, body.clone()).await;
        assert_eq!(refused.status, status, "{body}: {:?}", refused.body);
        assert_eq!(refused.headers["content-type"], "application/problem+json");
    }
    let not_json = Request::post(format!("/tickets/{id}/feedback"))
        .header("content-type", "application/json")
        .body(Body::from("{"))
        .unwrap();
    assert_eq!(app.request(not_json).await.status, 400);
    assert_eq!(
        give(
            &app,
            "not-a-uuid",
            json!({"department": "billing", "is_urgent": true})
        )
        .await
        .status,
        400
    );
    assert_eq!(
        app.count("SELECT count(*) FROM ticket_feedback").await,
        1,
        "only alice's"
    );
}

#[tokio::test]
async fn erasure_takes_feedback_and_its_share_of_agreement_and_eval_tickets_take_none() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let answers = evaluated(&app, 2).await;
    for (id, department, _) in &answers {
        give(
            &app,
            id,
            json!({"department": department, "is_urgent": false}),
        )
        .await;
    }
    assert_eq!(week(&op(&app, json!({"op": "stats"})).await)["n"], 2);
    op(&app, json!({"op": "erase", "ticket_ids": [answers[0].0]})).await;
    assert_eq!(week(&op(&app, json!({"op": "stats"})).await)["n"], 1);
    assert_eq!(app.count("SELECT count(*) FROM ticket_feedback").await, 1);

    // The ops Lambda's batch: production tickets only; an eval ticket is not found.
    let eval_ticket = app.post_ticket("Eval row", "labelled elsewhere").await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.exec(&format!(
        "UPDATE ticket SET workload = 'eval' WHERE id = '{eval_ticket}'"
    ))
    .await;
    let batch = op(
        &app,
        json!({"op": "feedback", "items": [{"ticket_id": eval_ticket, "department": "billing", "is_urgent": false}]}),
    )
    .await;
    assert_eq!(batch["given"], json!([]));
    assert_eq!(batch["not_found"], json!([eval_ticket]));
    // A bad item refuses the whole batch before anything is stored.
    let refused = try_op(
        &app,
        json!({"op": "feedback", "items": [
            {"ticket_id": answers[1].0, "department": "billing", "is_urgent": false},
            {"ticket_id": answers[1].0, "department": "legal", "is_urgent": false}]}),
    )
    .await;
    assert!(refused.is_err());
    assert_eq!(
        app.count("SELECT count(*) FROM ticket_feedback WHERE superseded_at IS NOT NULL")
            .await,
        0
    );
}

/// `triage eval --set feedback`: the versions judged on the tickets the desk labelled, through
/// the same pipeline (the production version's answers are reused, a candidate's are called
/// once), evaluated in place (no eval copy of a production ticket's text).
#[tokio::test]
async fn an_eval_over_the_desks_feedback_scores_versions_on_real_traffic() {
    let fake = FakeProvider::start().await;
    // The promote gate judges on the desk's last week (TRIAGE_EVAL_SET=feedback:7).
    let app = spawn_app_with_fake(&fake, |config| {
        config.quality.set = Some("feedback:7".into());
    })
    .await;
    let answers = evaluated(&app, 4).await;
    for (i, (id, department, _)) in answers.iter().enumerate() {
        let department = if i < 3 {
            department.as_str()
        } else {
            other(department)
        };
        give(
            &app,
            id,
            json!({"department": department, "is_urgent": false}),
        )
        .await;
    }
    let calls_before = fake.billed_calls().len();
    let pair = &app.config.versions;
    let promote = json!({"op": "promote", "prompt_version": pair.prompt.as_str(),
                         "model_version": pair.model.as_str()});
    let refused = try_op(&app, promote.clone()).await.unwrap_err().to_string();
    assert!(refused.contains("no eval run"), "{refused}");
    let request = json!({"op": "eval", "set": "feedback", "days": 7, "split": "test",
                         "versions": [app.config.versions.pair().to_string(), "triage-v5/gpt-other@medium"]});
    let queued = op(&app, request.clone()).await;
    assert_eq!(queued["set"]["source"], "feedback:7");
    assert_eq!(queued["set"]["rows"], 4);
    assert_eq!(
        app.count("SELECT count(*) FROM ticket WHERE workload = 'eval'")
            .await,
        0,
        "no copy of a production ticket"
    );
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let report = op(&app, request).await;
    assert_eq!(report["complete"], true, "{report}");
    // The production version's answers were there: its figures are the live agreement's.
    assert_eq!(report["runs"][0]["department"]["accuracy"], 0.75);
    assert_eq!(report["runs"][0]["calls"], 0);
    assert_eq!(
        fake.billed_calls().len() - calls_before,
        4,
        "the candidate, once per ticket"
    );
    assert_eq!(report["runs"][1]["n"], 4);
    // The offline baseline answered the same tickets in place.
    assert_eq!(report["baseline"]["answered"], 4, "{report}");
    // The gate finds the runs on today's feedback set.
    op(&app, promote).await;

    // No feedback in the window: refused, nothing queued.
    let empty = try_op(
        &app,
        json!({"op": "eval", "set": "feedback:1", "split": "test"}),
    )
    .await;
    app.exec("UPDATE ticket_feedback SET created_at = now() - interval '3 days'")
        .await;
    let empty_after = try_op(&app, json!({"op": "eval", "set": "feedback:1"})).await;
    assert!(empty.is_ok());
    let error = empty_after.unwrap_err().to_string();
    assert!(error.contains("labelled no ticket"), "{error}");
}

#[tokio::test]
async fn a_tickets_label_history_shows_each_labels_source_newest_first_to_its_reader_only() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let alice = iam("arn:aws:iam::123456789012:user/alice");
    let event = |method: &str, path: &str, body: Option<&str>, who: &Value| {
        let mut event = testkit::lambda::events::http_api(method, path, body);
        event["requestContext"]["authorizer"] = who.clone();
        event.to_string()
    };
    let body = json!({"subject": "Refund", "message": "charged twice"}).to_string();
    let (status, created) = send(&app, event("POST", "/tickets", Some(&body), &alice)).await;
    assert_eq!(status, 201);
    let path = format!("/tickets/{}/feedback", created["id"].as_str().unwrap());
    for labels in [
        json!({"department": "billing", "is_urgent": true}),
        json!({"department": "account", "is_urgent": false}),
    ] {
        let (status, _) = send(
            &app,
            event("POST", &path, Some(&labels.to_string()), &alice),
        )
        .await;
        assert_eq!(status, 200);
    }
    let (status, history) = send(&app, event("GET", &path, None, &alice)).await;
    assert_eq!(status, 200, "{history}");
    let labels = history["labels"].as_array().unwrap();
    assert_eq!(labels.len(), 2, "{history}");
    assert_eq!(
        (&labels[0]["department"], &labels[0]["current"]),
        (&json!("account"), &json!(true))
    );
    assert_eq!(
        (&labels[1]["department"], &labels[1]["current"]),
        (&json!("billing"), &json!(false))
    );
    assert!(labels.iter().all(|l| l["source"] == "desk"), "{history}");
    assert!(
        labels.iter().all(|l| l.get("given_by").is_none()),
        "{history}"
    );
    // Another reader's ticket is no ticket; a bad id is a 400.
    let bob = iam("arn:aws:iam::123456789012:user/bob");
    assert_eq!(send(&app, event("GET", &path, None, &bob)).await.0, 404);
    let bad = event("GET", "/tickets/not-a-uuid/feedback", None, &alice);
    assert_eq!(send(&app, bad).await.0, 400);
}
