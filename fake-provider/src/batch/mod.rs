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
mod ending;
mod files;
mod lines;

use std::{collections::HashMap, time::Instant};

use bytes::Bytes;
use hyper::{HeaderMap, Method, StatusCode, Uri};
use serde_json::{json, Value};

use crate::{
    render::{self, Call, Reply},
    server::{header_value, key_refused},
    Api, Behavior, Shared,
};
use describe::{describe, unix_now};
use ending::{anthropic_results, end_if_due};
use files::{upload, File};
use lines::read_lines;

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

pub(super) fn ok(value: Value) -> Answer {
    (StatusCode::OK, Bytes::from(value.to_string()))
}

/// An error answer in the API's words.
pub(super) fn refusal(api: Api, behavior: Behavior) -> Answer {
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
