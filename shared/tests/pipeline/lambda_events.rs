//! The router driven by API Gateway HTTP API (payload v2) events, as the api Lambda sees them.

use axum::body::Body;
use http_body_util::BodyExt;
use lambda_http::RequestExt;
use tower::ServiceExt;
use triage::http::router;

use crate::helpers::spawn_app;

fn event(method: &str, path: &str, body: Option<&str>, base64: bool) -> String {
    let mut event = testkit::lambda::events::http_api(method, path, body);
    event["isBase64Encoded"] = base64.into();
    event.to_string()
}

async fn send(app: &crate::helpers::TestApp, event: String) -> (u16, serde_json::Value) {
    let request = lambda_http::request::from_str(&event).expect("valid API Gateway v2 event");
    assert!(request.request_context_ref().is_some());
    let (parts, body) = request.into_parts();
    let request = axum::http::Request::from_parts(parts, Body::from(body.to_vec()));
    let response = router(app.state()).oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
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
