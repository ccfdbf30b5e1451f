//! The batch APIs, in each provider's own shapes: OpenAI's `/v1/files` (multipart upload with
//! a `purpose`, content download) and `/v1/batches` (create, retrieve, cancel, list), and
//! Anthropic's `/v1/messages/batches` (create, retrieve, cancel, list, results), each with its
//! deletion: what the provider holds of a ticket's text until the client deletes it.
//!
//! A batch ends when the scripted delay has passed since its creation, or once cancelled;
//! ending is done lazily by the next request that looks at it. Then each line is answered as
//! the synchronous endpoint would have answered it (its behaviour was taken from the script
//! when the batch was created), billed lines enter the ledger, and a line whose behaviour never
//! answers expires. In strict mode, request bodies are held to the published APIs, lines
//! included (see `strict`).

mod describe;
mod files;

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use bytes::Bytes;
use hyper::{HeaderMap, Method, StatusCode, Uri};
use serde_json::{json, Value};

use crate::{
    render::{self, Call, Reply},
    server::{header_value, key_refused},
    strict, Api, Behavior, CallRecord, Shared,
};
use describe::{describe, unix_now};
use files::{split, upload, File};

/// One batch as a test sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSummary {
    pub id: String,
    pub api: Api,
    /// OpenAI: the batch's metadata (`Null` for Anthropic, which has none).
    pub metadata: Value,
    /// OpenAI: the uploaded input file's name.
    pub input_filename: Option<String>,
    pub custom_ids: Vec<String>,
    pub cancelled: bool,
    /// Anthropic: deleted by the client (gone from every route).
    pub deleted: bool,
}

pub(crate) enum Route {
    UploadFile,
    FileContent(String),
    DeleteFile(String),
    Create(Api),
    List(Api, Option<String>, usize),
    Get(Api, String),
    Cancel(Api, String),
    Results(String),
    /// Anthropic's: only an ended batch may be deleted.
    Delete(String),
}

impl Route {
    fn api(&self) -> Api {
        match self {
            Route::UploadFile | Route::FileContent(_) | Route::DeleteFile(_) => Api::OpenAi,
            Route::Results(_) | Route::Delete(_) => Api::Anthropic,
            Route::Create(api)
            | Route::List(api, ..)
            | Route::Get(api, _)
            | Route::Cancel(api, _) => *api,
        }
    }
}

/// The batch route a request is for, if any.
pub(crate) fn route(method: &Method, uri: &Uri) -> Option<Route> {
    let path = uri.path().strip_prefix("/v1/")?;
    let segments: Vec<&str> = path.split('/').collect();
    let query: HashMap<&str, &str> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .collect();
    let limit = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(20);
    let list =
        |api: Api, cursor: &str| Route::List(api, query.get(cursor).map(|c| c.to_string()), limit);
    let id = |id: &&str| id.to_string();
    Some(match (method, segments.as_slice()) {
        (&Method::POST, ["files"]) => Route::UploadFile,
        (&Method::GET, ["files", file, "content"]) => Route::FileContent(id(file)),
        (&Method::DELETE, ["files", file]) => Route::DeleteFile(id(file)),
        (&Method::POST, ["batches"]) => Route::Create(Api::OpenAi),
        (&Method::GET, ["batches"]) => list(Api::OpenAi, "after"),
        (&Method::GET, ["batches", batch]) => Route::Get(Api::OpenAi, id(batch)),
        (&Method::POST, ["batches", batch, "cancel"]) => Route::Cancel(Api::OpenAi, id(batch)),
        (&Method::POST, ["messages", "batches"]) => Route::Create(Api::Anthropic),
        (&Method::GET, ["messages", "batches"]) => list(Api::Anthropic, "after_id"),
        (&Method::GET, ["messages", "batches", batch]) => Route::Get(Api::Anthropic, id(batch)),
        (&Method::POST, ["messages", "batches", batch, "cancel"]) => {
            Route::Cancel(Api::Anthropic, id(batch))
        }
        (&Method::GET, ["messages", "batches", batch, "results"]) => Route::Results(id(batch)),
        (&Method::DELETE, ["messages", "batches", batch]) => Route::Delete(id(batch)),
        _ => return None,
    })
}

struct Line {
    custom_id: String,
    call: Call,
    behavior: Behavior,
    /// The line's request, for the ledger.
    body: Value,
}

pub(super) enum LineEnd {
    /// What the synchronous endpoint would have sent.
    Replied {
        status: u16,
        body: Value,
    },
    Expired,
    Cancelled,
}

pub(super) struct FakeBatch {
    id: String,
    api: Api,
    created: Instant,
    created_unix: u64,
    metadata: Value,
    input_file_id: Option<String>,
    headers: HeaderMap,
    lines: Vec<Line>,
    cancelled: bool,
    /// Set when the batch ends: each line's end, in line order.
    ended: Option<Vec<LineEnd>>,
    output_file_id: Option<String>,
    error_file_id: Option<String>,
    deleted: bool,
}

#[derive(Default)]
pub(crate) struct Batches {
    files: HashMap<String, File>,
    batches: Vec<FakeBatch>,
    next_id: u64,
}

impl Batches {
    fn next_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:06}", self.next_id)
    }

    pub(crate) fn summaries(&self) -> Vec<BatchSummary> {
        self.batches
            .iter()
            .map(|b| BatchSummary {
                id: b.id.clone(),
                api: b.api,
                metadata: b.metadata.clone(),
                input_filename: b
                    .input_file_id
                    .as_ref()
                    .and_then(|f| self.files.get(f))
                    .map(|f| f.filename.clone()),
                custom_ids: b.lines.iter().map(|l| l.custom_id.clone()).collect(),
                cancelled: b.cancelled,
                deleted: b.deleted,
            })
            .collect()
    }

    /// The files and batches that still hold `text` (as JSON writes it): OpenAI's files,
    /// Anthropic's batches not deleted (their requests and results).
    pub(crate) fn holding(&self, text: &str) -> Vec<String> {
        let text = serde_json::to_string(text).unwrap_or_default();
        let text = text.trim_matches('"').as_bytes();
        let mut held: Vec<String> = self
            .files
            .iter()
            .filter(|(_, file)| files::find_bytes(&file.content, text).is_some())
            .map(|(id, _)| id.clone())
            .collect();
        held.extend(
            self.batches
                .iter()
                .filter(|b| b.api == Api::Anthropic && !b.deleted)
                .filter(|b| {
                    b.lines.iter().any(|line| {
                        let body = line.body.to_string();
                        files::find_bytes(body.as_bytes(), text).is_some()
                    })
                })
                .map(|b| b.id.clone()),
        );
        held.sort();
        held
    }
}

pub(super) type Answer = (StatusCode, Bytes);

/// Answers one batch request.
pub(crate) fn handle(route: Route, headers: &HeaderMap, body: &Bytes, shared: &Shared) -> Answer {
    let api = route.api();
    let (strict, delay) = {
        let script = shared.script();
        if key_refused(&script, api, headers) {
            return refusal(api, Behavior::Unauthorized);
        }
        if script.deletes_fail && matches!(route, Route::DeleteFile(_) | Route::Delete(_)) {
            return refusal(api, Behavior::Status(500));
        }
        (script.strict, script.batch_delay)
    };
    let now = Instant::now();
    let host = header_value(headers, "host")
        .unwrap_or("127.0.0.1")
        .to_owned();
    let mut batches = shared.batches();
    let batches = &mut *batches;
    match route {
        Route::UploadFile => upload(batches, headers, body, strict),
        Route::FileContent(id) => match batches.files.get(&id) {
            Some(file) => (StatusCode::OK, Bytes::from(file.content.clone())),
            None => not_found(Api::OpenAi, "file", &id),
        },
        Route::DeleteFile(id) => match batches.files.remove(&id) {
            Some(_) => ok(json!({"id": id, "object": "file", "deleted": true})),
            None => not_found(Api::OpenAi, "file", &id),
        },
        Route::Create(api) => {
            let lines = match read_lines(api, batches, body, strict) {
                Ok(lines) => lines,
                Err(refused) => return refused,
            };
            let lines = {
                let mut script = shared.script();
                lines
                    .into_iter()
                    .map(|(custom_id, body, call)| Line {
                        behavior: script.behavior(&call.ticket_text, &call.model),
                        custom_id,
                        body,
                        call,
                    })
                    .collect()
            };
            let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let batch = FakeBatch {
                id: batches.next_id(match api {
                    Api::OpenAi => "batch_",
                    Api::Anthropic => "msgbatch_",
                }),
                api,
                created: now,
                created_unix: unix_now(),
                metadata: request["metadata"].clone(),
                input_file_id: request["input_file_id"].as_str().map(str::to_owned),
                headers: headers.clone(),
                lines,
                cancelled: false,
                ended: None,
                output_file_id: None,
                error_file_id: None,
                deleted: false,
            };
            let answer = ok(describe(&batch, &host));
            batches.batches.push(batch);
            answer
        }
        Route::List(api, after, limit) => {
            let ids: Vec<usize> = (0..batches.batches.len())
                .rev()
                .filter(|i| batches.batches[*i].api == api && !batches.batches[*i].deleted)
                .collect();
            let start = match after {
                Some(after) => match ids.iter().position(|i| batches.batches[*i].id == after) {
                    Some(position) => position + 1,
                    None => return not_found(api, "batch", &after),
                },
                None => 0,
            };
            let page: Vec<usize> = ids
                .iter()
                .skip(start)
                .take(limit.clamp(1, 100))
                .copied()
                .collect();
            let data: Vec<Value> = page
                .iter()
                .map(|i| {
                    end_if_due(batches, *i, now, delay, shared);
                    describe(&batches.batches[*i], &host)
                })
                .collect();
            let first = data.first().map(|b| b["id"].clone()).unwrap_or(Value::Null);
            let last = data.last().map(|b| b["id"].clone()).unwrap_or(Value::Null);
            let has_more = start + page.len() < ids.len();
            let list = match api {
                Api::OpenAi => {
                    json!({"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": has_more})
                }
                Api::Anthropic => {
                    json!({"data": data, "first_id": first, "last_id": last, "has_more": has_more})
                }
            };
            ok(list)
        }
        Route::Get(api, id) => match find(batches, api, &id) {
            Some(i) => {
                end_if_due(batches, i, now, delay, shared);
                ok(describe(&batches.batches[i], &host))
            }
            None => not_found(api, "batch", &id),
        },
        Route::Cancel(api, id) => match find(batches, api, &id) {
            Some(i) => {
                end_if_due(batches, i, now, delay, shared);
                let batch = &mut batches.batches[i];
                if batch.ended.is_none() {
                    batch.cancelled = true;
                }
                ok(describe(batch, &host))
            }
            None => not_found(api, "batch", &id),
        },
        Route::Results(id) => match find(batches, Api::Anthropic, &id) {
            Some(i) => {
                end_if_due(batches, i, now, delay, shared);
                match anthropic_results(&batches.batches[i]) {
                    Some(jsonl) => (StatusCode::OK, Bytes::from(jsonl)),
                    None => not_found(Api::Anthropic, "results of batch", &id),
                }
            }
            None => not_found(Api::Anthropic, "batch", &id),
        },
        Route::Delete(id) => match find(batches, Api::Anthropic, &id) {
            Some(i) => {
                end_if_due(batches, i, now, delay, shared);
                let batch = &mut batches.batches[i];
                if batch.ended.is_none() {
                    let message = "Message Batch must be ended or canceled before deletion";
                    return reject(Api::Anthropic, "message_batch_id", message);
                }
                batch.deleted = true;
                ok(json!({"id": id, "type": "message_batch_deleted"}))
            }
            None => not_found(Api::Anthropic, "batch", &id),
        },
    }
}

/// A batch of `api` not deleted.
fn find(batches: &Batches, api: Api, id: &str) -> Option<usize> {
    batches
        .batches
        .iter()
        .position(|b| b.api == api && b.id == id && !b.deleted)
}

/// A batch's lines as (custom id, request, call), checked as the API checks them: OpenAI's
/// create body and input file, Anthropic's `requests`.
fn read_lines(
    api: Api,
    batches: &Batches,
    body: &[u8],
    strict: bool,
) -> Result<Vec<(String, Value, Call)>, Answer> {
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
        return Err(refusal(api, Behavior::InvalidRequest));
    };
    let mut seen = HashSet::new();
    let mut lines = Vec::new();
    match api {
        Api::OpenAi => {
            const KNOWN: &[&str] = &[
                "input_file_id",
                "endpoint",
                "completion_window",
                "metadata",
                "output_expires_after",
            ];
            if let Some(unknown) = request
                .keys()
                .find(|k| strict && !KNOWN.contains(&k.as_str()))
            {
                return Err(reject(
                    api,
                    unknown,
                    &format!("Unrecognized request argument supplied: {unknown}"),
                ));
            }
            if request.get("completion_window").and_then(Value::as_str) != Some("24h") {
                return Err(reject(
                    api,
                    "completion_window",
                    "Invalid value: supported values are: '24h'",
                ));
            }
            let endpoint = request
                .get("endpoint")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if endpoint != "/v1/chat/completions" {
                return Err(reject(
                    api,
                    "endpoint",
                    "Invalid value: this fake serves '/v1/chat/completions'",
                ));
            }
            if strict {
                if let Some(fault) = metadata_fault(request.get("metadata").unwrap_or(&Value::Null))
                {
                    return Err(reject(api, "metadata", &fault));
                }
            }
            let file = request
                .get("input_file_id")
                .and_then(Value::as_str)
                .and_then(|id| batches.files.get(id));
            let Some(file) = file.filter(|f| f.purpose == "batch") else {
                return Err(reject(
                    api,
                    "input_file_id",
                    "No such file with purpose 'batch'",
                ));
            };
            let mut model = None;
            for (n, line) in split(&file.content, b"\n").into_iter().enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let fault =
                    |why: &str| reject(api, "input_file_id", &format!("line {}: {why}", n + 1));
                let Ok(Value::Object(line)) = serde_json::from_slice::<Value>(line) else {
                    return Err(fault("not a JSON object"));
                };
                let keys: HashSet<&str> = line.keys().map(String::as_str).collect();
                if keys != HashSet::from(["custom_id", "method", "url", "body"]) {
                    return Err(fault("a line has exactly custom_id, method, url and body"));
                }
                if line["method"] != "POST" || line["url"] != endpoint {
                    return Err(fault("method must be POST and url the batch's endpoint"));
                }
                let custom_id = line["custom_id"].as_str().unwrap_or_default().to_owned();
                if custom_id.is_empty() || !seen.insert(custom_id.clone()) {
                    return Err(fault("custom_id must be a unique string"));
                }
                let body = line["body"].clone();
                if strict {
                    if let Some(refused) = strict::check(api, &body) {
                        return Err(fault(&format!("body refused: {refused:?}")));
                    }
                    if body.get("stream") == Some(&Value::Bool(true)) {
                        return Err(fault("streaming is not supported in batches"));
                    }
                    if model.get_or_insert_with(|| body["model"].clone()) != &body["model"] {
                        return Err(fault("every line of a batch uses the same model"));
                    }
                }
                let call = Call::read(api, &body);
                lines.push((custom_id, body, call));
            }
        }
        Api::Anthropic => {
            if let Some(unknown) = request.keys().find(|k| strict && k.as_str() != "requests") {
                return Err(reject(api, unknown, "Extra inputs are not permitted"));
            }
            let Some(requests) = request.get("requests").and_then(Value::as_array) else {
                return Err(reject(api, "requests", "Field required"));
            };
            if requests.is_empty() {
                return Err(reject(api, "requests", "List should have at least 1 item"));
            }
            for (i, entry) in requests.iter().enumerate() {
                let at = |what: &str| format!("requests.{i}.{what}");
                if let Some(unknown) = entry
                    .as_object()
                    .into_iter()
                    .flat_map(|e| e.keys())
                    .find(|k| strict && !["custom_id", "params"].contains(&k.as_str()))
                {
                    return Err(reject(api, &at(unknown), "Extra inputs are not permitted"));
                }
                let custom_id = entry["custom_id"].as_str().unwrap_or_default().to_owned();
                let valid = (1..=64).contains(&custom_id.len())
                    && custom_id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
                if !valid {
                    return Err(reject(
                        api,
                        &at("custom_id"),
                        "String should match pattern '^[a-zA-Z0-9_-]{1,64}$'",
                    ));
                }
                if !seen.insert(custom_id.clone()) {
                    return Err(reject(
                        api,
                        &at("custom_id"),
                        "custom_id must be unique within a batch",
                    ));
                }
                let params = entry["params"].clone();
                if !params.is_object() {
                    return Err(reject(api, &at("params"), "Field required"));
                }
                if strict {
                    if let Some(Behavior::RejectParameter { param, message }) =
                        strict::check(api, &params)
                    {
                        return Err(reject(api, &at(&format!("params.{param}")), &message));
                    }
                }
                let call = Call::read(api, &params);
                lines.push((custom_id, params, call));
            }
        }
    }
    Ok(lines)
}

/// OpenAI's metadata: at most 16 pairs, keys up to 64 characters, string values up to 512.
fn metadata_fault(metadata: &Value) -> Option<String> {
    let pairs = match metadata {
        Value::Null => return None,
        Value::Object(pairs) => pairs,
        _ => return Some("metadata must be an object".into()),
    };
    if pairs.len() > 16 {
        return Some("metadata has at most 16 pairs".into());
    }
    pairs.iter().find_map(|(key, value)| {
        let fits = key.len() <= 64 && value.as_str().is_some_and(|v| v.len() <= 512);
        (!fits)
            .then(|| format!("metadata.{key}: keys up to 64 characters, string values up to 512"))
    })
}

/// Ends batch `i` if its time has come (or it was cancelled): each line answered as the
/// synchronous endpoint would have, billed lines into the ledger, the result files written.
fn end_if_due(batches: &mut Batches, i: usize, now: Instant, delay: Duration, shared: &Shared) {
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

fn anthropic_results(batch: &FakeBatch) -> Option<Vec<u8>> {
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

pub(super) fn ok(value: Value) -> Answer {
    (StatusCode::OK, Bytes::from(value.to_string()))
}

/// An error answer in the API's words.
fn refusal(api: Api, behavior: Behavior) -> Answer {
    match render::reply(&behavior, api, &Call::read(api, &Value::Null)) {
        Reply::Send { status, body, .. } => (status, body),
        Reply::Reset | Reply::Hang => unreachable!("refusals are sent"),
    }
}

/// A 400 naming the parameter, as the APIs refuse a body.
pub(super) fn reject(api: Api, param: &str, message: &str) -> Answer {
    let behavior = Behavior::RejectParameter {
        param: param.to_owned(),
        message: message.to_owned(),
    };
    refusal(api, behavior)
}

fn not_found(api: Api, what: &str, id: &str) -> Answer {
    let message = format!("No {what} found with id '{id}'.");
    let body = match api {
        Api::OpenAi => {
            json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}})
        }
        Api::Anthropic => {
            json!({"type": "error", "error": {"type": "not_found_error", "message": message}})
        }
    };
    (StatusCode::NOT_FOUND, Bytes::from(body.to_string()))
}
