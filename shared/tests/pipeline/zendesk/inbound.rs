use std::time::Duration;

use fake_provider::zendesk::{self, created_event, Ticket, ACCOUNT_ID};
use serde_json::json;

use super::{spawn, timestamp, use_zendesk, SECRET};
use crate::helpers::{spawn_app, spawn_app_with};

fn ticket(id: i64) -> Ticket {
    Ticket::new(
        id,
        &format!("Card declined #{id}"),
        "My card was charged twice today.",
    )
}

#[tokio::test]
async fn a_signed_created_event_becomes_one_ticket_of_the_desk_however_often_it_comes() {
    let app = spawn(None).await;
    let event = created_event("01HN-1", &ticket(35436));
    let first = app.post_event(&event).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["received"], "created");
    // Zendesk's retry of the same event, and another event for the same Zendesk ticket.
    let retry = app.post_event(&event).await;
    let other = app
        .post_event(&created_event("01HN-2", &ticket(35436)))
        .await;
    assert_eq!((retry.status, other.status), (200, 200));
    assert_eq!(retry.body["received"], "already here");
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 1);
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 1);
    let owner = triage::pipeline::zendesk::owner(ACCOUNT_ID);
    let row = app
        .row("SELECT t.owner, t.subject, z.zendesk_id, t.id::text FROM ticket t JOIN zendesk_ticket z ON z.ticket_id = t.id")
        .await;
    assert_eq!(row.get::<_, String>(0), owner);
    assert_eq!(row.get::<_, String>(1), "Card declined #35436");
    assert_eq!(row.get::<_, i64>(2), 35436);
    assert_eq!(
        first.body["ticket_id"].as_str().unwrap(),
        row.get::<_, String>(3)
    );
}

#[tokio::test]
async fn unsigned_wrongly_signed_and_replayed_events_are_refused_and_change_nothing() {
    let app = spawn(None).await;
    let event = created_event("01HN-1", &ticket(1));
    let body = event.to_string();
    let now = timestamp(Duration::ZERO);
    let old = timestamp(Duration::from_secs(10 * 60));
    let cases = [
        ("unsigned", None, None),
        (
            "no timestamp",
            Some(zendesk::sign(SECRET, &now, body.as_bytes())),
            None,
        ),
        (
            "another secret",
            Some(zendesk::sign("not-the-secret", &now, body.as_bytes())),
            Some(now.clone()),
        ),
        (
            "another body",
            Some(zendesk::sign(SECRET, &now, b"{}")),
            Some(now.clone()),
        ),
        (
            "replayed ten minutes later",
            Some(zendesk::sign(SECRET, &old, body.as_bytes())),
            Some(old.clone()),
        ),
    ];
    for (case, signature, at) in cases {
        let answer = app.post_event_with(&event, signature, at).await;
        assert_eq!(answer.status, 401, "{case}: {:?}", answer.body);
    }
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM zendesk_ticket").await, 0);
}

#[tokio::test]
async fn without_a_signing_secret_the_route_does_not_exist() {
    let app = spawn_app().await;
    let answer = app.post_event(&created_event("01HN-1", &ticket(1))).await;
    assert_eq!(answer.status, 404);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 0);
}

#[tokio::test]
async fn a_malformed_event_is_a_422_naming_what_is_wrong() {
    let app = spawn(None).await;
    let answer = app
        .post_event(
            &json!({"type": "zen:event-type:ticket.created", "id": "x", "detail": {"id": "1"}}),
        )
        .await;
    assert_eq!(answer.status, 422);
    assert!(
        answer.body["detail"]
            .as_str()
            .unwrap()
            .contains("account_id"),
        "{:?}",
        answer.body
    );
}

/// A desk after an outage: every event of a burst sent at once is stored, once. 400 here;
/// `ZENDESK_BURST=10000` runs the 10,000 (docs/zendesk.md, "Scale: a burst").
#[tokio::test]
async fn a_burst_of_created_events_is_accepted_without_loss() {
    let n: i64 = std::env::var("ZENDESK_BURST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let app = spawn(None).await;
    let started = std::time::Instant::now();
    let sent = futures::future::join_all((1..=n).map(|id| {
        let app = &app;
        async move {
            let event = created_event(&format!("evt-{id}"), &ticket(id));
            // Zendesk retries a 503 (the pool saturated by the burst); anything else is final.
            let until = started + Duration::from_secs(300);
            loop {
                match app.post_event(&event).await.status {
                    503 if std::time::Instant::now() < until => {
                        tokio::time::sleep(Duration::from_millis(100)).await
                    }
                    status => return status,
                }
            }
        }
    }))
    .await;
    assert!(sent.iter().all(|&status| status == 200), "{sent:?}");
    eprintln!("{n} created events stored in {:?}", started.elapsed());
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, n);
    assert_eq!(
        app.count("SELECT count(*) FROM zendesk_ticket WHERE ticket_id IS NOT NULL")
            .await,
        n
    );
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, n);
}

/// A desk's quota delays, never refuses (docs/caller-limits.md, "A desk's tickets"): with
/// `TRIAGE_DESK_DAILY_TICKETS` at 2, five created events are all taken (200, five tickets),
/// two jobs can be claimed now, and the others wait for 00:00 UTC of the first days with room:
/// two tomorrow, one the day after.
#[tokio::test]
async fn past_its_daily_quota_a_desks_tickets_are_taken_and_their_jobs_wait_for_a_day_with_room() {
    let app = spawn_app_with(|config| {
        use_zendesk(config, None);
        config.limits.desk_daily_tickets = Some(2);
    })
    .await;
    for id in 1..=5 {
        let event = created_event(&format!("01HQ-{id}"), &ticket(id));
        let answer = app.post_event(&event).await;
        assert_eq!(
            (answer.status, answer.body["received"].as_str()),
            (200, Some("created"))
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 5);
    let days: Vec<i32> = app
        .row(
            "SELECT array_agg((available_at AT TIME ZONE 'UTC')::date \
                 - (now() AT TIME ZONE 'UTC')::date ORDER BY id) FROM evaluation_outbox",
        )
        .await
        .get(0);
    assert_eq!(days, [0, 0, 1, 1, 2]);
    // Those that wait start at the day's first second.
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE available_at > now() \
             AND available_at <> date_trunc('day', available_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
        )
        .await,
        0
    );
    // A POST /tickets caller's quota is another's: the desk's counts are its owner's rows.
    let owner = triage::pipeline::zendesk::owner(ACCOUNT_ID);
    assert_eq!(
        app.count(&format!(
            "SELECT sum(tickets)::bigint FROM caller_daily_tickets WHERE owner = '{owner}'"
        ))
        .await,
        5
    );
}
