//! The router driven by API Gateway HTTP API (payload v2) events, as the api Lambda sees them.

use axum::body::Body;
use http_body_util::BodyExt;
use lambda_http::RequestExt;
use tower::ServiceExt;
use triage::http::router;

use crate::helpers::spawn_app;

fn event(method: &str, path: &str, body: Option<&str>, base64: bool) -> String {
    serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": { "content-type": "application/json", "host": "abc.execute-api.eu-west-1.amazonaws.com" },
        "requestContext": {
            "accountId": "123456789012", "apiId": "abc", "domainName": "abc.execute-api.eu-west-1.amazonaws.com",
            "domainPrefix": "abc", "requestId": "req-1", "routeKey": "$default", "stage": "$default",
            "time": "30/Nov/2026:01:00:00 +0000", "timeEpoch": 1_795_000_000_000u64,
            "http": { "method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "test" }
        },
        "body": body,
        "isBase64Encoded": base64
    })
    .to_string()
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
