//! The events AWS hands the functions, in the shapes their runtimes parse.

use serde_json::{json, Value};

/// An API Gateway HTTP API request (payload format 2.0), as the api function receives it.
pub fn http_api(method: &str, path: &str, body: Option<&str>) -> Value {
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": { "content-type": "application/json", "host": "abc.execute-api.eu-west-1.amazonaws.com" },
        "requestContext": {
            "accountId": "123456789012", "apiId": "abc", "domainName": "abc.execute-api.eu-west-1.amazonaws.com",
            "domainPrefix": "abc", "requestId": "req-1", "routeKey": "$default", "stage": "$default",
            "time": "30/Nov/2026:01:00:00 +0000", "timeEpoch": 1_795_000_000_000u64,
            "http": { "method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "test" },
            // Every deployed route has an authorizer (template.yaml): a SigV4-signed service.
            "authorizer": { "iam": { "accountId": "123456789012", "userArn": "arn:aws:iam::123456789012:user/test-service" } }
        },
        "body": body,
        "isBase64Encoded": false
    })
}

/// An EventBridge scheduled event, as the worker and sweeper receive them.
pub fn scheduled() -> Value {
    json!({
        "version": "0",
        "id": uuid::Uuid::new_v4().to_string(),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2026-11-30T01:00:00Z",
        "region": "eu-west-1",
        "resources": ["arn:aws:events:eu-west-1:123456789012:rule/triage-schedule"],
        "detail": {}
    })
}

/// An SQS event carrying one doorbell message, as the worker receives it from the scaler's
/// queue through its event source mapping (batch size 1).
pub fn sqs_doorbell() -> Value {
    json!({
        "Records": [{
            "messageId": uuid::Uuid::new_v4().to_string(),
            "receiptHandle": "AQEB-doorbell",
            "body": "{\"doorbell\":true}",
            "attributes": {
                "ApproximateReceiveCount": "1",
                "SentTimestamp": "1764550800000",
                "SenderId": "AROAEXAMPLE:triage-scaler",
                "ApproximateFirstReceiveTimestamp": "1764550800001"
            },
            "messageAttributes": {},
            "md5OfBody": "0",
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:triage-doorbell",
            "awsRegion": "eu-west-1"
        }]
    })
}
