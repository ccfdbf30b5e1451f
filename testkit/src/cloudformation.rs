//! CloudFormation's side of a custom resource: the request event it sends, and a stand-in for
//! the pre-signed S3 ResponseURL it waits on (a loopback server keeping every answer).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::put,
    Router,
};
use serde_json::{json, Value};
use tokio::sync::watch;

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

struct Bucket {
    refuse: usize,
    requests: usize,
    answers: Vec<Answer>,
    /// How many answers were accepted, for `wait_for_answers`.
    accepted: watch::Sender<usize>,
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
            requests: 0,
            answers: Vec::new(),
            accepted: watch::Sender::new(0),
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

    /// The answers, once at least `count` were accepted; panics after `timeout`. For a function
    /// that answers and then ends without returning (a panic), where no invocation result
    /// says when to look.
    pub async fn wait_for_answers(&self, count: usize, timeout: Duration) -> Vec<Answer> {
        let mut accepted = self.bucket.lock().unwrap().accepted.subscribe();
        tokio::time::timeout(timeout, accepted.wait_for(|n| *n >= count))
            .await
            .unwrap_or_else(|_| panic!("fewer than {count} answers within {timeout:?}"))
            .expect("the stand-in is running");
        self.answers()
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
    bucket.accepted.send_replace(bucket.answers.len());
    StatusCode::OK
}
