//! Endpoints: one at a private address is refused; a slow endpoint or a busy owner holds
//! only its own share; the console shows a disabled one and why.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use triage::pipeline::delivery::claimed;

use crate::{
    helpers::gateway::{iam, send},
    helpers::{
        spawn_app_with,
        webhooks::{fast_delivery, ingest, subscribe, Answer, Receiver},
    },
};

use super::spawn;

#[tokio::test]
async fn an_endpoint_at_a_private_address_is_refused() {
    let app = spawn().await;
    for url in [
        "https://10.0.0.7/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/hook",
        "http://example.com/hook",
        "http://127.0.0.2:8080/hook",
    ] {
        let mut event = testkit::lambda::events::http_api(
            "POST",
            "/subscriptions",
            Some(&json!({ "url": url }).to_string()),
        );
        event["requestContext"]["authorizer"] = iam("arn:aws:iam::123456789012:user/alice");
        let (status, problem) = send(&app, event.to_string()).await;
        assert_eq!(status, 400, "{url}: {problem}");
        assert!(problem["detail"].as_str().is_some(), "{problem}");
    }
    assert_eq!(app.count("SELECT count(*) FROM subscription").await, 0);

    // A name that resolves to loopback passes the URL check but not the resolver's: the
    // endpoint is disabled at its first attempt, and nothing reaches the receiver.
    let receiver = Receiver::start(|_| Answer::Status(200)).await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    subscribe(&app, None, &format!("https://localhost:{port}/hook")).await;
    ingest(&app, None, "Password reset").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    app.deliver_all(Duration::from_secs(10)).await;
    assert!(receiver.received().is_empty());
    let reason: String = app
        .row("SELECT disabled_reason FROM subscription")
        .await
        .get(0);
    assert!(
        reason.contains("private, loopback or link-local"),
        "{reason}"
    );
    // Its owner reads the reason back (GET /subscriptions): it names no address, which would
    // tell where the service's network resolves names. The operator's report has it.
    assert!(
        !reason.contains("127.0.0.1") && !reason.contains("::1"),
        "{reason}"
    );
    let report = triage::pipeline::delivery::status::deliveries(&app.pool)
        .await
        .unwrap();
    let why = report.endpoints[0].why().unwrap();
    assert!(why.contains("127.0.0.1") || why.contains("::1"), "{why}");
    assert_eq!(
        app.count("SELECT count(*) FROM delivery WHERE status = 'dead' AND error_class = 'endpoint_disabled'").await,
        1
    );
}

#[tokio::test]
async fn a_slow_endpoint_holds_only_its_own_slots() {
    let app = spawn_app_with(|config| {
        fast_delivery(config);
        config.delivery.timeout = Duration::from_secs(3);
        config.delivery.lease = Duration::from_secs(10);
        config.delivery.per_endpoint = 2;
    })
    .await;
    let slow = Receiver::start(|_| Answer::Hang).await;
    let fast = Receiver::start(|_| Answer::Status(200)).await;
    subscribe(&app, None, &slow.url).await;
    let fast_sub = subscribe(&app, None, &fast.url).await;
    for i in 0..20 {
        ingest(&app, None, &format!("Ticket {i}")).await;
    }
    app.drain(&app.worker(), Duration::from_secs(10)).await;

    let started = Instant::now();
    let deliverer = app.deliverer();
    let run = tokio::spawn(async move {
        deliverer
            .run_invocation(
                Instant::now() + Duration::from_secs(30),
                &CancellationToken::new(),
            )
            .await
    });
    app.wait_until(
        &format!(
            "SELECT count(*) FROM delivery WHERE status = 'done' AND subscription_id = '{}'",
            fast_sub.subscription.id
        ),
        |n| n == 20,
        "the fast endpoint was held up",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "before the slow endpoint's first timeout"
    );
    assert!(
        slow.received().len() <= 2,
        "at most its bound in flight: {}",
        slow.received().len()
    );
    run.abort();
}

#[tokio::test]
async fn one_owners_ten_thousand_waiting_deliveries_do_not_delay_anothers_one() {
    let app = spawn().await;
    for i in 0..3 {
        subscribe(&app, Some("busy"), &format!("http://127.0.0.1:9/hook/{i}")).await;
    }
    let quiet = subscribe(&app, Some("quiet"), "http://127.0.0.1:9/hook/quiet").await;
    let ticket = ingest(&app, Some("busy"), "Backlog").await;
    ingest(&app, Some("quiet"), "One question").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    // 10,000 more waiting for the busy owner's three endpoints, all older than the quiet one's.
    app.exec(&format!(
        "INSERT INTO delivery (subscription_id, event_id, ticket_id, idempotency_key, available_at)
         SELECT s.id, 'evt_' || s.id || '_' || i, d.ticket_id, d.idempotency_key,
                now() - interval '1 hour'
         FROM subscription s, generate_series(1, 3334) i,
              (SELECT ticket_id, idempotency_key FROM delivery WHERE ticket_id = '{ticket}' LIMIT 1) d
         WHERE s.owner = 'busy'"
    ))
    .await;
    let waiting = |owner: &'static str| {
        format!(
            "SELECT count(*) FROM delivery d JOIN subscription s ON s.id = d.subscription_id
             WHERE d.status = 'pending' AND s.owner = '{owner}'"
        )
    };
    assert!(app.count(&waiting("busy")).await > 10_000);
    assert_eq!(app.count(&waiting("quiet")).await, 1);

    // A claim of 8, 4 per endpoint: the busy owner alone could fill it with its oldest.
    let client = app.pool.get().await.unwrap();
    let claimed = claimed::claim(&client, "deliverer-test", 8, Duration::from_secs(30), 4)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 8);
    assert!(
        claimed
            .iter()
            .any(|d| d.subscription_id == quiet.subscription.id),
        "the quiet owner's delivery waits behind the busy owner's backlog"
    );
}

#[tokio::test]
async fn the_console_shows_a_disabled_endpoint_and_why_but_no_secret() {
    let app = spawn().await;
    let healthy = Receiver::start(|_| Answer::Status(200)).await;
    let healthy_sub = subscribe(&app, None, &healthy.url).await;
    let refused = subscribe(&app, None, "https://localhost:9/hook").await;
    ingest(&app, None, "Console").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    app.deliver_all(Duration::from_secs(10)).await;

    let base = crate::console::serve_console(&app, None).await;
    let page = triage::tls::https_client_builder()
        .build()
        .unwrap()
        .get(format!("{base}/admin/deliveries"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let row = |id: uuid::Uuid| {
        let start = page
            .find(&format!("data-endpoint=\"{id}\""))
            .expect("a row per subscription");
        page[start..].split("</tr>").next().unwrap().to_string()
    };
    assert!(
        row(refused.subscription.id).contains("data-status=\"disabled\""),
        "{page}"
    );
    assert!(row(refused.subscription.id).contains("private, loopback or link-local"));
    assert!(row(healthy_sub.subscription.id).contains("data-status=\"active\""));
    assert!(!page.contains("whsec_"), "no secret on the page");
    assert!(!page.contains("The body of the ticket"), "no ticket text");
}
