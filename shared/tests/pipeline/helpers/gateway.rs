//! API Gateway HTTP API (payload v2) events through the router, as the api Lambda sees them,
//! and the authorizer contexts API Gateway puts in them.

use axum::body::Body;
use http_body_util::BodyExt;
use lambda_http::RequestExt;
use tower::ServiceExt;
use triage::http::router;

use super::TestApp;

/// Sends an API Gateway v2 `event` through the router: the status and the JSON body (null
/// when there is none).
pub async fn send(app: &TestApp, event: String) -> (u16, serde_json::Value) {
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

/// An IAM authorizer context for the caller `user_arn`.
pub fn iam(user_arn: &str) -> serde_json::Value {
    serde_json::json!({"iam": {"accountId": "123456789012", "callerId": "AROAEXAMPLE:session",
                               "userArn": user_arn, "userId": "AROAEXAMPLE:session"}})
}

/// A JWT authorizer context: the token's issuer and subject, no scope.
pub fn jwt(issuer: &str, subject: &str) -> serde_json::Value {
    serde_json::json!({"jwt": {"claims": {"iss": issuer, "sub": subject}, "scopes": null}})
}

/// [`jwt`] from the test issuer, with the token's `scope` claim.
pub fn scoped_jwt(subject: &str, scope: &str) -> serde_json::Value {
    let mut authorizer = jwt("https://issuer.example", subject);
    authorizer["jwt"]["claims"]["scope"] = scope.into();
    authorizer
}
