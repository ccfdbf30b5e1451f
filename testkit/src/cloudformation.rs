//! CloudFormation's side of a custom resource: the request event it sends, and a stand-in for
//! the pre-signed S3 ResponseURL it waits on (a loopback server keeping every answer).

use std::sync::{Arc, Mutex};

use axum::{
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::put,
    Router,
};
use serde_json::{json, Value};

/// The ARN of the migrate function; `MigrateVersion` is this plus `:VERSION`.
pub const FUNCTION_ARN: &str =
    "arn:aws:lambda:eu-west-1:123456789012:function:triage-MigrateFunction-x1";

/// A request as CloudFormation sends it (the documented shape, fields the handler ignores
/// included) for the `Migration` resource at function version `version`.
pub fn event(kind: &str, version: &str, response_url: &str) -> Value {
    let mut event = json!({
        "RequestType": kind,
        "ServiceToken": format!("{FUNCTION_ARN}:live"),
        "ResponseURL": response_url,
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/triage/guid",
        "RequestId": "unique-id-for-this-request",
        "LogicalResourceId": "Migration",
        "ResourceType": "AWS::CloudFormation::CustomResource",
        "ResourceProperties": {
            "ServiceToken": format!("{FUNCTION_ARN}:live"),
            "MigrateVersion": format!("{FUNCTION_ARN}:{version}"),
        },
    });
    if kind != "Create" {
        event["PhysicalResourceId"] = json!("triage-migrations");
        event["OldResourceProperties"] = json!({"MigrateVersion": format!("{FUNCTION_ARN}:1")});
    }
    event
}

/// One PUT to the ResponseURL.
#[derive(Debug, Clone)]
pub struct Answer {
    pub content_type: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Bucket {
    refuse: usize,
    requests: usize,
    answers: Vec<Answer>,
}

/// The stand-in for S3, serving until dropped with the test's runtime.
pub struct ResponseUrl {
    pub url: String,
    bucket: Arc<Mutex<Bucket>>,
}

impl ResponseUrl {
    /// Answers 503 to the first `refuse` PUTs (S3 has bad moments too), 200 afterwards.
    pub async fn start(refuse: usize) -> Self {
        let bucket = Arc::new(Mutex::new(Bucket {
            refuse,
            ..Bucket::default()
        }));
        let app = Router::new()
            .route("/bucket/answer", put(store))
            .with_state(bucket.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url: format!("http://{addr}/bucket/answer?X-Amz-Signature=abc"),
            bucket,
        }
    }

    /// The answers accepted so far.
    pub fn answers(&self) -> Vec<Answer> {
        self.bucket.lock().unwrap().answers.clone()
    }

    /// PUTs received, refused ones included.
    pub fn requests(&self) -> usize {
        self.bucket.lock().unwrap().requests
    }
}

async fn store(
    State(bucket): State<Arc<Mutex<Bucket>>>,
    headers: HeaderMap,
    body: String,
) -> StatusCode {
    let mut bucket = bucket.lock().unwrap();
    bucket.requests += 1;
    if bucket.requests <= bucket.refuse {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let content_type = headers
        .get("content-type")
        .map(|v| v.to_str().unwrap_or_default().to_string());
    let body = serde_json::from_str(&body).expect("the answer is JSON");
    bucket.answers.push(Answer { content_type, body });
    StatusCode::OK
}
