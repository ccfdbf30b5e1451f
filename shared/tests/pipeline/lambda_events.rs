//! The router driven by API Gateway HTTP API (payload v2) events, as the api Lambda sees them.

use crate::helpers::{
    gateway::{iam, jwt, send},
    spawn_app,
};

fn event(method: &str, path: &str, body: Option<&str>, base64: bool) -> String {
    let mut event = testkit::lambda::events::http_api(method, path, body);
    event["isBase64Encoded"] = base64.into();
    event.to_string()
}

#[tokio::test]
async fn api_gateway_v2_post_then_get_round_trips() {
    let app = spawn_app().await;
    let (status, created) = send(
        &app,
        event(
            "POST",
            "/tickets",
            Some(r#"{"subject":"a","message":"b"}"#),
            false,
        ),
    )
    .await;
    assert_eq!(status, 201);
    let id = created["id"].as_str().unwrap();
    let (status, shown) = send(&app, event("GET", &format!("/tickets/{id}"), None, false)).await;
    assert_eq!(status, 200);
    assert_eq!(shown["evaluation"]["status"], "pending");
}

#[tokio::test]
async fn api_gateway_v2_base64_body_is_decoded() {
    let app = spawn_app().await;
    // {"subject":"a","message":"b"}
    let (status, _) = send(
        &app,
        event(
            "POST",
            "/tickets",
            Some("eyJzdWJqZWN0IjoiYSIsIm1lc3NhZ2UiOiJiIn0="),
            true,
        ),
    )
    .await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn api_gateway_v2_malformed_body_is_a_400_problem() {
    let app = spawn_app().await;
    let (status, problem) = send(&app, event("POST", "/tickets", Some("{"), false)).await;
    assert_eq!(status, 400);
    assert_eq!(problem["status"], 400);
}

/// A `POST /tickets` with `Idempotency-Key: k1` from the caller `authorizer` describes.
fn keyed_post(authorizer: serde_json::Value, message: &str) -> String {
    let body = serde_json::json!({"subject": "Refund", "message": message}).to_string();
    let mut event = testkit::lambda::events::http_api("POST", "/tickets", Some(&body));
    event["headers"]["idempotency-key"] = "\"k1\"".into();
    event["requestContext"]["authorizer"] = authorizer;
    event.to_string()
}

#[tokio::test]
async fn idempotency_keys_belong_to_the_authenticated_caller() {
    let app = spawn_app().await;
    let alice = || iam("arn:aws:iam::123456789012:user/alice");
    let bob = || iam("arn:aws:iam::123456789012:user/bob");

    let (status, first) = send(&app, keyed_post(alice(), "double charge")).await;
    assert_eq!(status, 201);
    // Another caller's k1 is another request: its own ticket, not a 422 or alice's ticket.
    let (status, other) = send(&app, keyed_post(bob(), "card declined")).await;
    assert_eq!(status, 201);
    assert_ne!(other["id"], first["id"]);
    // Alice's retry replays her ticket; her k1 with another body is still a mismatch.
    let (status, replay) = send(&app, keyed_post(alice(), "double charge")).await;
    assert_eq!((status, &replay["id"]), (201, &first["id"]));
    let (status, _) = send(&app, keyed_post(alice(), "card declined")).await;
    assert_eq!(status, 422);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 2);
}

#[tokio::test]
async fn an_assumed_role_keeps_its_keys_across_sessions_and_jwt_callers_are_kept_apart() {
    let app = spawn_app().await;
    let session = |name: &str| {
        iam(&format!(
            "arn:aws:sts::123456789012:assumed-role/ticketing/{name}"
        ))
    };
    let (_, first) = send(&app, keyed_post(session("i-0aaa"), "outage")).await;
    let (status, retry) = send(&app, keyed_post(session("i-0bbb"), "outage")).await;
    assert_eq!((status, &retry["id"]), (201, &first["id"]));

    let issuer = "https://issuer.example";
    let (_, one) = send(&app, keyed_post(jwt(issuer, "svc-1"), "outage")).await;
    let (_, two) = send(&app, keyed_post(jwt(issuer, "svc-2"), "outage")).await;
    let (_, again) = send(&app, keyed_post(jwt(issuer, "svc-1"), "outage")).await;
    assert_ne!(one["id"], two["id"]);
    assert_eq!(again["id"], one["id"]);
    assert_ne!(one["id"], first["id"]);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 3);
}

#[tokio::test]
async fn a_request_through_api_gateway_without_a_principal_is_a_401_and_changes_nothing() {
    let app = spawn_app().await;
    let (_, kept) = send(&app, keyed_post(iam("arn:aws:iam::1:user/alice"), "kept")).await;
    let kept = kept["id"].as_str().unwrap().to_string();
    let no_sub =
        serde_json::json!({"jwt": {"claims": {"iss": "https://issuer.example"}, "scopes": null}});
    for authorizer in [serde_json::Value::Null, no_sub] {
        let (status, problem) = send(&app, keyed_post(authorizer.clone(), "anonymous")).await;
        assert_eq!(
            (status, &problem["status"]),
            (401, &401.into()),
            "{authorizer}"
        );
        let mut get = testkit::lambda::events::http_api("GET", &format!("/tickets/{kept}"), None);
        get["requestContext"]["authorizer"] = authorizer;
        assert_eq!(send(&app, get.to_string()).await.0, 401);
    }
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 1);
    // Locally, with no API Gateway in front, callers are anonymous.
    assert_eq!(app.post_ticket("local", "serve").await.status, 201);
}

#[test]
fn in_jwt_mode_the_template_scopes_post_to_write_and_get_to_read() {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
    let route = |key: &str| {
        let start = template.find(&format!("RouteKey: {key}")).expect(key);
        template[start..]
            .lines()
            .take(6)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        route("POST /tickets").contains("AuthorizationScopes: !If [UseJwt, [!Ref JwtWriteScope]")
    );
    // A ticket's label history is read like the ticket.
    for key in ["GET /tickets/{id}", "GET /tickets/{id}/feedback"] {
        assert!(
            route(key).contains("AuthorizationScopes: !If [UseJwt, [!Ref JwtReadScope]"),
            "{key}"
        );
    }
}
