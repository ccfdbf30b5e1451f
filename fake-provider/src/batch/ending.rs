//! A batch's end: each line answered as the synchronous endpoint would have answered it, billed
//! lines into the ledger, the result files written.

use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde_json::{json, Value};

use super::{files::File, Batches, FakeBatch, LineEnd};
use crate::{
    render::{self, Reply},
    Api, CallRecord, Shared,
};

/// Ends batch `i` if its time has come (or it was cancelled): each line answered as the
/// synchronous endpoint would have, billed lines into the ledger, the result files written.
pub(super) fn end_if_due(
    batches: &mut Batches,
    i: usize,
    now: Instant,
    delay: Duration,
    shared: &Shared,
) {
    let batch = &batches.batches[i];
    if batch.ended.is_some() || (!batch.cancelled && now < batch.created + delay) {
        return;
    }
    let mut ends = Vec::new();
    for line in &batch.lines {
        if batch.cancelled {
            ends.push(LineEnd::Cancelled);
            continue;
        }
        let (_, behavior) = line.behavior.clone().split_delay();
        let mut call = line.call.clone();
        call.usage = shared.usage(&call);
        match render::reply(&behavior, batch.api, &call) {
            Reply::Send { status, body, .. } => {
                if status == StatusCode::OK {
                    shared.record(CallRecord {
                        ticket_text: call.ticket_text.clone(),
                        api: batch.api,
                        model: call.model.clone(),
                        status: 200,
                        billed: true,
                        at: now,
                        body: line.body.clone(),
                        batch: Some(batch.id.clone()),
                        usage: call.usage,
                        headers: batch.headers.clone(),
                    });
                }
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                ends.push(LineEnd::Replied {
                    status: status.as_u16(),
                    body,
                });
            }
            // Never answered within the window.
            Reply::Reset | Reply::Hang => ends.push(LineEnd::Expired),
        }
    }
    if batch.api == Api::OpenAi {
        let (mut output, mut errors) = (Vec::new(), Vec::new());
        for (n, (line, end)) in batch.lines.iter().zip(&ends).enumerate() {
            let (file, response, error) = match end {
                LineEnd::Replied { status: 200, body } => (
                    &mut output,
                    json!({"status_code": 200, "request_id": format!("req_{n}"), "body": body}),
                    Value::Null,
                ),
                LineEnd::Replied { status, body } => (
                    &mut errors,
                    json!({"status_code": status, "request_id": format!("req_{n}"), "body": body}),
                    Value::Null,
                ),
                LineEnd::Expired => (
                    &mut errors,
                    Value::Null,
                    json!({"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}),
                ),
                LineEnd::Cancelled => (
                    &mut errors,
                    Value::Null,
                    json!({"code": "batch_cancelled", "message": "This request was not executed because the batch was cancelled."}),
                ),
            };
            let entry = json!({"id": format!("batch_req_{n}"), "custom_id": line.custom_id, "response": response, "error": error});
            file.extend_from_slice(entry.to_string().as_bytes());
            file.push(b'\n');
        }
        let id = batch.id.clone();
        let mut store = |content: Vec<u8>, kind: &str| {
            (!content.is_empty()).then(|| {
                let file_id = batches.next_id("file-");
                let file = File {
                    filename: format!("{id}_{kind}.jsonl"),
                    purpose: "batch_output".into(),
                    content,
                };
                batches.files.insert(file_id.clone(), file);
                file_id
            })
        };
        let output_file_id = store(output, "output");
        let error_file_id = store(errors, "error");
        let batch = &mut batches.batches[i];
        batch.output_file_id = output_file_id;
        batch.error_file_id = error_file_id;
    }
    batches.batches[i].ended = Some(ends);
}

pub(super) fn anthropic_results(batch: &FakeBatch) -> Option<Vec<u8>> {
    let ends = batch.ended.as_ref()?;
    let mut jsonl = Vec::new();
    for (line, end) in batch.lines.iter().zip(ends) {
        let result = match end {
            LineEnd::Replied { status: 200, body } => json!({"type": "succeeded", "message": body}),
            LineEnd::Replied { body, .. } => json!({"type": "errored", "error": body}),
            LineEnd::Expired => json!({"type": "expired"}),
            LineEnd::Cancelled => json!({"type": "canceled"}),
        };
        let entry = json!({"custom_id": line.custom_id, "result": result});
        jsonl.extend_from_slice(entry.to_string().as_bytes());
        jsonl.push(b'\n');
    }
    Some(jsonl)
}
