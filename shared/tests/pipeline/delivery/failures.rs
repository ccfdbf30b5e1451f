//! Failures on either side of a delivery: a receiver down then back, a deliverer killed
//! mid-delivery and its expired leases, an invocation too short for one delivery.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use triage::pipeline::sweep;

use crate::helpers::{
    spawn_app_with,
    webhooks::{fast_delivery, ingest, subscribe, verify_with_reference_library, Answer, Receiver},
};

use super::spawn;

#[tokio::test]
async fn a_receiver_down_then_back_gets_every_event_with_the_same_webhook_id() {
    let app = spawn().await;
    // Each event: a 503, then a timeout, then accepted.
    let receiver = Receiver::start(|attempt| match attempt {
        1 => Answer::Status(503),
        2 => Answer::Hang,
        _ => Answer::Status(204),
    })
    .await;
    let sub = subscribe(&app, None, &receiver.url).await;
    let mut tickets = Vec::new();
    for subject in ["Charged twice", "Cannot log in", "Upgrade plan"] {
        tickets.push(ingest(&app, None, subject).await);
    }
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    assert_eq!(app.count("SELECT count(*) FROM delivery").await, 3);

    app.deliver_all(Duration::from_secs(20)).await;

    let attempts = receiver.attempts();
    assert_eq!(attempts.len(), 3, "one webhook-id per event: {attempts:?}");
    assert!(attempts.values().all(|&n| n == 3), "{attempts:?}");
    tickets.sort();
    assert_eq!(receiver.ticket_ids(), tickets);
    assert_eq!(
        app.count("SELECT count(*) FROM delivery WHERE status = 'done' AND attempts = 3")
            .await,
        3
    );
    // The endpoint is healthy again after its success.
    assert_eq!(
        app.count("SELECT count(*) FROM subscription WHERE failing_since IS NOT NULL")
            .await,
        0
    );
    let first: Value = serde_json::from_str(&receiver.received()[0].body).unwrap();
    assert_eq!(first["type"], "ticket.evaluated");
    let data = &first["data"];
    for field in [
        "ticket_id",
        "is_urgent",
        "department",
        "urgency_score",
        "model_version",
        "prompt_version",
        "policy_version",
        "evaluated_at",
    ] {
        assert!(!data[field].is_null(), "{field} missing from {data}");
    }
    assert!(
        data.get("subject").is_none() && data.get("message").is_none(),
        "no ticket text unless asked: {data}"
    );
    verify_with_reference_library(&sub.secret, &receiver.received());
}

#[tokio::test]
async fn a_deliverer_killed_mid_delivery_loses_nothing() {
    let app = spawn().await;
    // The first attempts hang, so the deliverer is killed while they are in flight.
    let receiver = Receiver::start(|attempt| match attempt {
        1 => Answer::Hang,
        _ => Answer::Status(200),
    })
    .await;
    let sub = subscribe(&app, None, &receiver.url).await;
    for subject in ["One", "Two"] {
        ingest(&app, None, subject).await;
    }
    app.drain(&app.worker(), Duration::from_secs(10)).await;

    app.kill_a_deliverer_with_two_in_flight().await;

    let swept = sweep::return_expired_leases(&app.pool, &app.config.worker)
        .await
        .unwrap();
    assert_eq!(swept.delivery_leases_returned, 2);
    app.deliver_all(Duration::from_secs(10)).await;
    assert_eq!(receiver.ticket_ids().len(), 2);
    assert!(receiver.attempts().values().all(|&n| n == 2));
    verify_with_reference_library(&sub.secret, &receiver.received());
}

#[tokio::test]
async fn a_dead_deliverers_expired_leases_do_not_hold_its_endpoints_room_until_the_sweeper() {
    // Two in flight per endpoint: a deliverer killed with both in flight held the endpoint
    // until the sweeper's tick returned its rows, however long after their leases ended.
    let app = spawn_app_with(|config| {
        fast_delivery(config);
        config.delivery.per_endpoint = 2;
    })
    .await;
    // The first two requests hang (the deliverer is killed with them in flight); the rest pass.
    let requests = std::sync::atomic::AtomicUsize::new(0);
    let receiver = Receiver::start(move |_| {
        match requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 | 1 => Answer::Hang,
            _ => Answer::Status(200),
        }
    })
    .await;
    subscribe(&app, None, &receiver.url).await;
    for subject in ["One", "Two"] {
        ingest(&app, None, subject).await;
    }
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    app.kill_a_deliverer_with_two_in_flight().await;

    // New results for the same endpoint: the next deliverer sends them at once, no sweep first.
    let later: Vec<String> = [
        ingest(&app, None, "Three").await,
        ingest(&app, None, "Four").await,
    ]
    .into();
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    let report = app
        .deliverer()
        .run_invocation(
            Instant::now() + Duration::from_secs(5),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.delivered, 2, "{report:?}");
    let mut sent = receiver.ticket_ids();
    sent.retain(|id| later.contains(id));
    assert_eq!(sent.len(), 2);
    // The dead deliverer's two come back with the sweeper and are delivered: none lost.
    let swept = sweep::return_expired_leases(&app.pool, &app.config.worker)
        .await
        .unwrap();
    assert_eq!(swept.delivery_leases_returned, 2);
    app.deliver_all(Duration::from_secs(10)).await;
    assert_eq!(receiver.ticket_ids().len(), 4);
}

#[tokio::test]
async fn an_invocation_too_short_for_one_delivery_is_refused_naming_the_setting_and_claims_nothing()
{
    let app = spawn_app_with(|config| {
        fast_delivery(config);
        config.delivery.timeout = Duration::from_secs(10);
        config.delivery.lease = Duration::from_secs(30);
    })
    .await;
    let receiver = Receiver::start(|_| Answer::Status(200)).await;
    subscribe(&app, None, &receiver.url).await;
    ingest(&app, None, "Charged twice").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;

    // `triage deliver --once` with TRIAGE_INVOCATION_SECONDS=5 beside the default 10 s timeout.
    let refused = app
        .deliverer()
        .run_invocation(
            Instant::now() + Duration::from_secs(5),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("TRIAGE_WEBHOOK_TIMEOUT_SECONDS"),
        "{refused}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM delivery WHERE status = 'pending'")
            .await,
        1,
        "nothing claimed"
    );
    assert!(receiver.received().is_empty());
}
