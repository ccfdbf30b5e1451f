//! Subscriptions are per caller: one never receives another's tickets; secrets rotate;
//! a caller's limit holds under concurrent creation; the list comes in pages.

use std::time::Duration;

use serde_json::{json, Value};
use triage::pipeline::{delivery::subscription, ingest::Submitter};

use crate::{
    helpers::gateway::{iam, send},
    helpers::webhooks::{ingest, subscribe, verify_with_reference_library, Answer, Receiver},
};

use super::spawn;

#[tokio::test]
async fn a_subscriber_never_receives_another_callers_tickets() {
    let app = spawn().await;
    let alice = || iam("arn:aws:iam::123456789012:user/alice");
    let bob = || iam("arn:aws:iam::123456789012:user/bob");
    let (alice_hook, bob_hook) = (
        Receiver::start(|_| Answer::Status(200)).await,
        Receiver::start(|_| Answer::Status(200)).await,
    );
    let call = |authorizer: Value, method: &str, path: &str, body: Option<Value>| {
        let body = body.map(|b| b.to_string());
        let mut event = testkit::lambda::events::http_api(method, path, body.as_deref());
        event["requestContext"]["authorizer"] = authorizer;
        event.to_string()
    };
    let (status, alice_sub) = send(
        &app,
        call(
            alice(),
            "POST",
            "/subscriptions",
            Some(json!({"url": alice_hook.url})),
        ),
    )
    .await;
    assert_eq!(status, 201, "{alice_sub}");
    assert!(alice_sub["secret"].as_str().unwrap().starts_with("whsec_"));
    let (status, _) = send(
        &app,
        call(
            bob(),
            "POST",
            "/subscriptions",
            Some(json!({"url": bob_hook.url})),
        ),
    )
    .await;
    assert_eq!(status, 201);

    let ticket = |authorizer, subject: &str| {
        call(
            authorizer,
            "POST",
            "/tickets",
            Some(json!({"subject": subject, "message": "Same words for both callers"})),
        )
    };
    let (_, alice_ticket) = send(&app, ticket(alice(), "Alice's invoice")).await;
    let (_, bob_ticket) = send(&app, ticket(bob(), "Bob's invoice")).await;
    // Bob also sends Alice's content: a duplicate of hers, his own ticket.
    let (_, bob_duplicate) = send(&app, ticket(bob(), "Alice's invoice")).await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    // Bob's duplicate is held (docs/dedup.md) for up to 1.5 times the hold before its event.
    app.deliver_all(Duration::from_secs(10) + app.config.limits.dedup_hold * 3 / 2)
        .await;

    let id = |v: &Value| v["id"].as_str().unwrap().to_string();
    assert_eq!(alice_hook.ticket_ids(), vec![id(&alice_ticket)]);
    let mut bobs = vec![id(&bob_ticket), id(&bob_duplicate)];
    bobs.sort();
    assert_eq!(bob_hook.ticket_ids(), bobs);

    // Listing and deleting are scoped the same way.
    let (_, listed) = send(&app, call(bob(), "GET", "/subscriptions", None)).await;
    assert_eq!(listed["subscriptions"].as_array().unwrap().len(), 1);
    assert_ne!(listed["subscriptions"][0]["id"], alice_sub["id"]);
    assert!(
        listed["subscriptions"][0].get("secret").is_none(),
        "the secret is shown once"
    );
    let alice_path = format!("/subscriptions/{}", alice_sub["id"].as_str().unwrap());
    let (status, _) = send(&app, call(bob(), "DELETE", &alice_path, None)).await;
    assert_eq!(status, 404);
    let (status, _) = send(&app, call(alice(), "DELETE", &alice_path, None)).await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn during_a_rotation_both_secrets_verify() {
    let app = spawn().await;
    let receiver = Receiver::start(|_| Answer::Status(200)).await;
    let sub = subscribe(&app, None, &receiver.url).await;
    let rotated =
        subscription::rotate(&app.pool, Some(Submitter::LOCAL.owner), sub.subscription.id)
            .await
            .unwrap()
            .unwrap();
    assert_ne!(rotated.secret, sub.secret);
    assert!(
        subscription::rotate(&app.pool, Some("someone-else"), sub.subscription.id)
            .await
            .unwrap()
            .is_none()
    );
    ingest(&app, None, "Rotation").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    app.deliver_all(Duration::from_secs(10)).await;
    let received = receiver.received();
    assert_eq!(received[0].signature.split(' ').count(), 2);
    verify_with_reference_library(&rotated.secret, &received);
    verify_with_reference_library(&sub.secret, &received);
}

#[tokio::test]
async fn one_caller_may_have_ten_subscriptions_even_when_creating_them_all_at_once() {
    let app = spawn().await;
    let created = futures::future::join_all((0..12).map(|i| {
        subscription::create(
            &app.pool,
            Some("alice"),
            Box::leak(format!("http://127.0.0.1:9/hook/{i}").into_boxed_str()),
            false,
            &app.config.delivery,
        )
    }))
    .await;
    let made = created
        .into_iter()
        .filter(|c| matches!(c, Ok(subscription::Creation::Created(_))))
        .count();
    assert_eq!(made, 10, "the default limit, however many arrive together");
    assert_eq!(
        app.count("SELECT count(*) FROM subscription WHERE owner = 'alice'")
            .await,
        10
    );
    // Another caller is not held by alice's.
    subscribe(&app, Some("bob"), "http://127.0.0.1:9/hook/bob").await;

    // Through the API: a 409 saying what to do, and nothing written.
    let body = json!({ "url": "http://127.0.0.1:9/hook/more" }).to_string();
    let mut event = testkit::lambda::events::http_api("POST", "/subscriptions", Some(&body));
    event["requestContext"]["authorizer"] = iam("arn:aws:iam::123456789012:user/carol");
    for expected in std::iter::repeat_n(201, 10).chain([409]) {
        let (status, answer) = send(&app, event.to_string()).await;
        assert_eq!(status, expected, "{answer}");
        if status == 409 {
            assert!(
                answer["detail"].as_str().unwrap().contains("delete one"),
                "{answer}"
            );
        }
    }
    assert_eq!(app.count("SELECT count(*) FROM subscription").await, 21);
}

#[tokio::test]
async fn the_subscription_list_comes_in_pages() {
    let app = spawn().await;
    for i in 0..5 {
        subscribe(&app, None, &format!("http://127.0.0.1:9/hook/{i}")).await;
    }
    let state = app.state();
    let page = |query: String| {
        let state = state.clone();
        async move {
            let request = axum::http::Request::get(format!("/subscriptions{query}"))
                .body(axum::body::Body::empty())
                .unwrap();
            let response = tower::ServiceExt::oneshot(triage::http::router(state), request)
                .await
                .unwrap();
            let status = response.status().as_u16();
            let bytes = http_body_util::BodyExt::collect(response.into_body())
                .await
                .unwrap()
                .to_bytes();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    let (mut seen, mut after) = (Vec::new(), String::new());
    let mut sizes = Vec::new();
    loop {
        let (status, body) = page(format!("?limit=2{after}")).await;
        assert_eq!(status, 200, "{body}");
        let ids: Vec<String> = body["subscriptions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["url"].as_str().unwrap().to_string())
            .collect();
        sizes.push(ids.len());
        seen.extend(ids);
        match body["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
    }
    assert_eq!(sizes, [2, 2, 1]);
    let expected: Vec<String> = (0..5)
        .map(|i| format!("http://127.0.0.1:9/hook/{i}"))
        .collect();
    assert_eq!(seen, expected, "oldest first, each once");
    for bad in ["?limit=0", "?limit=101", "?after=not-a-uuid", "?page=2"] {
        assert_eq!(page(bad.to_string()).await.0, 400, "{bad}");
    }
}
