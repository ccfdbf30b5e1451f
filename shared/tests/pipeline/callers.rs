//! What one caller can learn from, or take from, another (issue "Round four", items 1 and 5):
//! dedup tells no caller that another sent the same text first, in what it shows or when.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{
    helpers::{spawn_app_with, TestApp},
    security::{get_as, iam, post_as},
};

fn time(value: &Value) -> chrono::DateTime<chrono::Utc> {
    value.as_str().unwrap().parse().unwrap()
}

/// Reads `id` as `who` until its evaluation is done (a condition awaited, not a sleep).
async fn until_done(app: &TestApp, who: &Value, id: &str, within: Duration) -> Value {
    let until = Instant::now() + within;
    loop {
        let (status, body) = get_as(app, who, id).await;
        assert_eq!(status, 200, "{body}");
        if body["evaluation"]["status"] == "done" {
            return body;
        }
        assert!(Instant::now() < until, "never done: {body}");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_text_another_caller_sent_first_looks_like_a_fresh_evaluation() {
    let hold = Duration::from_millis(400);
    let app = spawn_app_with(|config| config.limits.dedup_hold = hold).await;
    let (alice, bob) = (iam("alice"), iam("bob"));
    let (_, _, first) = post_as(&app, &alice, "the same text").await;
    app.run_worker_once(&app.worker()).await;
    let (_, alices) = get_as(&app, &alice, first["id"].as_str().unwrap()).await;
    assert_eq!(alices["evaluation"]["status"], "done");
    // Alice's result is an hour old when Bob sends the same text.
    app.exec("UPDATE evaluation_result SET computed_at = computed_at - interval '1 hour'")
        .await;

    let sent = Instant::now();
    let (_, _, second) = post_as(&app, &bob, "the same text").await;
    let id = second["id"].as_str().unwrap();
    // At once, Bob sees what a ticket nobody sent before shows: pending, no answer.
    let (status, bobs) = get_as(&app, &bob, id).await;
    assert_eq!(status, 200);
    assert_eq!(bobs["evaluation"]["status"], "pending", "{bobs}");
    assert!(bobs["evaluation"].get("department").is_none(), "{bobs}");
    // Then done, after about as long as an evaluation takes, and evaluated after it was created.
    let bobs = until_done(&app, &bob, id, Duration::from_secs(10)).await;
    assert!(sent.elapsed() >= hold / 2, "done after {:?}", sent.elapsed());
    let (created, evaluated) = (
        time(&bobs["created_at"]),
        time(&bobs["evaluation"]["evaluated_at"]),
    );
    assert!(
        evaluated - created >= chrono::Duration::from_std(hold / 2).unwrap(),
        "evaluated {evaluated}, created {created}: {bobs}"
    );
    for field in ["prompt_version", "model_version", "policy_version"] {
        assert_eq!(bobs["evaluation"][field], alices["evaluation"][field]);
    }
    // A text Alice sent herself before is no secret to her: her own duplicate is not held.
    let (_, _, again) = post_as(&app, &alice, "the same text").await;
    let (_, alices_again) = get_as(&app, &alice, again["id"].as_str().unwrap()).await;
    assert_eq!(alices_again["evaluation"]["status"], "done", "{alices_again}");
}
