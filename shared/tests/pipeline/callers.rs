//! What one caller can learn from, or take from, another (issue "Round four", items 1 and 5):
//! dedup tells no caller that another sent the same text first, in what it shows, what it
//! announces, or when; one caller's requests cannot use up everyone's, nor grow a ticket's
//! feedback without bound.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{
    helpers::webhooks::{fast_delivery, ingest, subscribe, Answer, Receiver},
    helpers::{spawn_app_with, TestApp},
    security::{get_as, iam, post_as, send_as},
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
    // At once, Bob sees what a ticket nobody sent before shows: pending (or already processing,
    // as the hold turns a tenth to two-fifths of the way in), no answer.
    let (status, bobs) = get_as(&app, &bob, id).await;
    assert_eq!(status, 200);
    let shown = bobs["evaluation"]["status"].as_str().unwrap();
    assert!(["pending", "processing"].contains(&shown), "{bobs}");
    assert!(bobs["evaluation"].get("department").is_none(), "{bobs}");
    // Then done, after about as long as an evaluation takes, and evaluated after it was created.
    let bobs = until_done(&app, &bob, id, Duration::from_secs(10)).await;
    assert!(
        sent.elapsed() >= hold / 2,
        "done after {:?}",
        sent.elapsed()
    );
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
    assert_eq!(
        alices_again["evaluation"]["status"], "done",
        "{alices_again}"
    );
}

/// A held duplicate goes through the statuses a fresh evaluation shows, `pending` (waiting for
/// its claim), then `processing` (its provider call), then `done`, not `pending` straight to
/// `done`, which polling would tell apart (issue "Round five", item 1). The hour-long hold is
/// moved through by its times, so no step depends on the clock.
#[tokio::test]
async fn a_held_duplicate_shows_pending_then_processing_then_done_as_a_fresh_one_does() {
    let app = spawn_app_with(|config| config.limits.dedup_hold = Duration::from_secs(3600)).await;
    let (alice, bob) = (iam("alice"), iam("bob"));
    post_as(&app, &alice, "the same text").await;
    app.run_worker_once(&app.worker()).await;
    let (_, _, second) = post_as(&app, &bob, "the same text").await;
    let id = second["id"].as_str().unwrap();
    let status = || async {
        let (_, bobs) = get_as(&app, &bob, id).await;
        let answered = bobs["evaluation"].get("department").is_some();
        (
            bobs["evaluation"]["status"].as_str().unwrap().to_owned(),
            answered,
        )
    };
    let mut seen = vec![status().await];
    // Late in the hold: where a fresh job has been claimed and is calling the model.
    app.exec(&format!(
        "UPDATE ticket SET created_at = now() - interval '55 minutes', \
         held_until = now() + interval '5 minutes' WHERE id = '{id}'"
    ))
    .await;
    seen.push(status().await);
    app.exec(&format!(
        "UPDATE ticket SET held_until = now() - interval '1 second' WHERE id = '{id}'"
    ))
    .await;
    seen.push(status().await);
    let seen: Vec<_> = seen.iter().map(|(s, a)| (s.as_str(), *a)).collect();
    assert_eq!(
        seen,
        [("pending", false), ("processing", false), ("done", true)]
    );
}

#[tokio::test]
async fn a_text_another_caller_sent_first_is_announced_to_its_sender_only_when_its_hold_ends() {
    let hold = Duration::from_millis(400);
    let app = spawn_app_with(|config| {
        fast_delivery(config);
        config.limits.dedup_hold = hold;
    })
    .await;
    let receiver = Receiver::start(|_| Answer::Status(200)).await;
    ingest(&app, Some("alice"), "the same text").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    subscribe(&app, Some("bob"), &receiver.url).await;

    let sent = Instant::now();
    let bobs = ingest(&app, Some("bob"), "the same text").await;
    // Bob's event waits for the hold as his reads do: a webhook at once would tell him.
    let early = app
        .count(&format!(
            "SELECT count(*) FROM delivery d JOIN ticket t ON t.id = d.ticket_id
             WHERE t.id = '{bobs}' AND (t.held_until IS NULL OR d.available_at < t.held_until)"
        ))
        .await;
    assert_eq!(early, 0, "bob's delivery is available before his hold ends");
    app.deliver_all(Duration::from_secs(10)).await;
    assert_eq!(receiver.ticket_ids(), vec![bobs.clone()]);
    assert!(
        sent.elapsed() >= hold / 2,
        "delivered after {:?}",
        sent.elapsed()
    );
    // And it says the ticket was evaluated after it was created, as his reads do.
    let event: Value = serde_json::from_str(&receiver.received()[0].body).unwrap();
    let created: chrono::DateTime<chrono::Utc> = app
        .row(&format!(
            "SELECT created_at FROM ticket WHERE id = '{bobs}'"
        ))
        .await
        .get(0);
    let evaluated = time(&event["data"]["evaluated_at"]);
    assert!(
        evaluated - created >= chrono::Duration::from_std(hold / 2).unwrap(),
        "evaluated {evaluated}, created {created}: {event}"
    );
}

/// The database's current UTC minute, as the rate counts it.
async fn minute(app: &TestApp) -> i64 {
    app.count("SELECT extract(epoch FROM date_trunc('minute', now()))::int8")
        .await
}

#[tokio::test]
async fn past_its_rate_a_caller_gets_a_429_on_every_route_and_other_callers_keep_theirs() {
    let app = spawn_app_with(|config| config.limits.caller_rpm = Some(3)).await;
    let (alice, bob) = (iam("alice"), iam("bob"));
    // The window is the minute: a run that straddles two is run again.
    for attempt in 0.. {
        let started = minute(&app).await;
        let tickets_before = app.count("SELECT count(*) FROM ticket").await;
        let (status, _, created) = post_as(&app, &alice, &format!("attempt {attempt}")).await;
        assert_eq!(status, 201, "{created}");
        let id = created["id"].as_str().unwrap().to_string();
        assert_eq!(get_as(&app, &alice, &id).await.0, 200);
        let feedback = r#"{"department": "billing", "is_urgent": false}"#;
        let path = format!("/tickets/{id}/feedback");
        let (status, _, _) = send_as(&app, &alice, "POST", &path, Some(feedback), None).await;
        assert!(status < 300, "{status}");
        // The fourth request of the minute, whatever its route, is refused and does nothing.
        let (read, _) = get_as(&app, &alice, &id).await;
        let (status, headers, problem) = post_as(&app, &alice, "one too many").await;
        let (fed, _, _) = send_as(&app, &alice, "POST", &path, Some(feedback), None).await;
        let (bobs, _, _) = post_as(&app, &bob, "bob's own").await;
        if minute(&app).await != started {
            assert!(attempt < 3, "the minute kept turning");
            continue;
        }
        assert_eq!((read, status, fed), (429, 429, 429), "{problem}");
        let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&retry), "{retry}");
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(
            app.count("SELECT count(*) FROM ticket").await,
            tickets_before + 2,
            "alice's first and bob's: the refused post wrote nothing"
        );
        assert_eq!(bobs, 201, "another caller keeps its own rate");
        break;
    }
}

/// `POST /tickets` counts its rate and quota inside ingest's statement: what it refuses before
/// ingest, a keyed request and a ticket past its quota still count against the rate.
#[tokio::test]
async fn every_post_counts_against_the_rate_refused_keyed_or_past_the_quota() {
    let app = spawn_app_with(|config| {
        config.limits.caller_rpm = Some(4);
        config.limits.caller_daily_tickets = Some(1);
    })
    .await;
    // A new caller for each attempt: the quota is a day's.
    for attempt in 0.. {
        let started = minute(&app).await;
        let owner = format!("alice-{attempt}");
        let alice = iam(&owner);
        let tickets_before = app.count("SELECT count(*) FROM ticket").await;
        let (invalid, _, _) = send_as(&app, &alice, "POST", "/tickets", Some("{"), None).await;
        let (created, _, _) = post_as(&app, &alice, &format!("first {attempt}")).await;
        let (over_quota, _, quota) = post_as(&app, &alice, &format!("second {attempt}")).await;
        let body = format!(r#"{{"subject": "Refund", "message": "keyed {attempt}"}}"#);
        let (keyed, _, _) =
            send_as(&app, &alice, "POST", "/tickets", Some(&body), Some("k1")).await;
        let (past_rate, headers, rate) = post_as(&app, &alice, &format!("third {attempt}")).await;
        if minute(&app).await != started {
            assert!(attempt < 3, "the minute kept turning");
            continue;
        }
        assert_eq!((invalid, created), (400, 201));
        assert_eq!(over_quota, 429, "{quota}");
        assert!(
            quota["detail"]
                .as_str()
                .unwrap()
                .contains("tickets for today"),
            "{quota}"
        );
        assert_eq!(keyed, 429, "the quota, as the keyed path counts it");
        assert_eq!(past_rate, 429, "{rate}");
        assert!(
            rate["detail"]
                .as_str()
                .unwrap()
                .contains("requests of this minute"),
            "{rate}"
        );
        assert!(headers.contains_key("retry-after"));
        assert_eq!(
            app.count("SELECT count(*) FROM ticket").await,
            tickets_before + 1,
            "only the first was written"
        );
        break;
    }
}

#[tokio::test]
async fn a_tickets_feedback_history_keeps_only_its_newest_labels() {
    let app = spawn_app_with(|config| config.limits.feedback_history = 3).await;
    let alice = iam("alice");
    let (_, _, created) = post_as(&app, &alice, "labelled again and again").await;
    let id = created["id"].as_str().unwrap();
    let path = format!("/tickets/{id}/feedback");
    let departments = [
        "billing",
        "technical",
        "account",
        "sales",
        "general",
        "billing",
    ];
    for department in departments {
        let body = format!(r#"{{"department": "{department}", "is_urgent": false}}"#);
        let (status, _, given) = send_as(&app, &alice, "POST", &path, Some(&body), None).await;
        assert!(status < 300, "{given}");
    }
    let kept = app
        .count(&format!(
            "SELECT count(*) FROM ticket_feedback WHERE ticket_id = '{id}'"
        ))
        .await;
    assert_eq!(kept, 3, "the cap, the current label included");
    let current = app
        .row(&format!(
            "SELECT department FROM ticket_feedback WHERE ticket_id = '{id}' AND superseded_at IS NULL"
        ))
        .await;
    assert_eq!(current.get::<_, String>(0), "billing", "the newest stands");
}
