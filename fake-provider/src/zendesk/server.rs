//! The fake account's HTTP side: each request is checked against Zendesk's reference, then
//! answered as Zendesk answers it.

use std::{convert::Infallible, sync::Arc};

use base64::{engine::general_purpose::STANDARD, Engine};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{
    body::Incoming, server::conn::http1, service::service_fn, Method, Response, StatusCode,
};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::{net::TcpListener, sync::oneshot, task::JoinSet};

use super::{Account, Request, Shared};

const PRIORITIES: [&str; 4] = ["urgent", "high", "normal", "low"];
/// What an Update Ticket body may carry here (the connector's part of the Tickets API).
const UPDATE_FIELDS: [&str; 8] = [
    "group_id",
    "priority",
    "additional_tags",
    "remove_tags",
    "safe_update",
    "updated_stamp",
    "status",
    "comment",
];

pub(super) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => if let Ok((stream, _)) = accepted {
                let shared = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| handle(request, shared.clone()));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

pub(super) fn edit(account: &mut Account, id: i64, group: Option<i64>, priority: Option<String>) {
    change(account, id, |ticket| {
        if group.is_some() {
            ticket.group_id = group;
        }
        if priority.is_some() {
            ticket.priority = priority;
        }
    });
}

/// A change made in Zendesk (not through the API): bumps the ticket's `updated_at`.
pub(super) fn change(account: &mut Account, id: i64, apply: impl FnOnce(&mut super::Ticket)) {
    account.clock += 1;
    let clock = account.clock;
    if let Some(ticket) = account.tickets.get_mut(&id) {
        apply(ticket);
        ticket.version = clock;
    }
}

async fn handle(
    request: hyper::Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let mut account = shared.account();
    let expected = format!(
        "Basic {}",
        STANDARD.encode(format!("{}/token:{}", shared.email, account.token))
    );
    let authorized = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(expected.as_str());
    let (status, answer, retry_after) = if !authorized {
        account.violations.push(format!(
            "{} {path}: not basic auth as email/token:api_token",
            parts.method
        ));
        (
            StatusCode::UNAUTHORIZED,
            json!({"error": "Couldn't authenticate you"}),
            None,
        )
    } else if let Some(seconds) = account.throttle.pop_front() {
        (
            StatusCode::TOO_MANY_REQUESTS,
            json!({"error": "APIRateLimitExceeded"}),
            Some(seconds),
        )
    } else {
        let (status, answer) = route(&mut account, &shared, &parts.method, &path, &query, &body);
        (status, answer, None)
    };
    account.requests.push(Request {
        method: parts.method.to_string(),
        path,
        query,
        body,
        status: status.as_u16(),
    });
    let mut response = Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8");
    if let Some(seconds) = retry_after {
        response = response.header("retry-after", seconds.to_string());
    }
    Ok(response
        .body(Full::new(Bytes::from(answer.to_string())))
        .expect("a valid response"))
}

fn ticket_id(path: &str) -> Option<i64> {
    path.strip_prefix("/api/v2/tickets/")?
        .trim_end_matches(".json")
        .parse()
        .ok()
}

fn not_found() -> (StatusCode, Value) {
    (
        StatusCode::NOT_FOUND,
        json!({"error": "RecordNotFound", "description": "Not found"}),
    )
}

fn route(
    account: &mut Account,
    shared: &Shared,
    method: &Method,
    path: &str,
    query: &str,
    body: &Value,
) -> (StatusCode, Value) {
    match (method, path) {
        (&Method::GET, "/api/v2/users/me.json") => (
            StatusCode::OK,
            json!({"user": {"id": shared.api_user, "role": "agent"}}),
        ),
        (&Method::GET, "/api/v2/incremental/tickets/cursor.json") => export(account, query),
        (&Method::GET, _) if ticket_id(path).is_some() => {
            match account.tickets.get(&ticket_id(path).unwrap_or(0)) {
                Some(ticket) => (StatusCode::OK, json!({"ticket": ticket.json()})),
                None => not_found(),
            }
        }
        (&Method::PUT, _) if ticket_id(path).is_some() => {
            update(account, ticket_id(path).unwrap_or(0), body)
        }
        _ => {
            account.violations.push(format!(
                "{method} {path}: not an endpoint the connector needs"
            ));
            not_found()
        }
    }
}

fn update(account: &mut Account, id: i64, body: &Value) -> (StatusCode, Value) {
    let Some(fields) = body.get("ticket").and_then(Value::as_object) else {
        account
            .violations
            .push(format!("PUT {id}: the body is not {{\"ticket\": {{...}}}}"));
        return (StatusCode::BAD_REQUEST, json!({"error": "InvalidEndpoint"}));
    };
    for name in fields.keys() {
        if name == "tags" {
            account.violations.push(format!(
                "PUT {id}: `tags` replaces the agents' tags; use additional_tags"
            ));
        } else if !UPDATE_FIELDS.contains(&name.as_str()) {
            account
                .violations
                .push(format!("PUT {id}: unknown field {name}"));
        }
    }
    let safe = fields.get("safe_update") == Some(&Value::Bool(true));
    let stamp = fields
        .get("updated_stamp")
        .and_then(Value::as_str)
        .map(str::to_string);
    if !safe || stamp.is_none() {
        account.violations.push(format!(
            "PUT {id}: not a safe update (safe_update and updated_stamp)"
        ));
    }
    // `null` empties it, as Zendesk's reference allows.
    if let Some(priority) = fields.get("priority").filter(|p| !p.is_null()) {
        if !priority.as_str().is_some_and(|p| PRIORITIES.contains(&p)) {
            account.violations.push(format!(
                "PUT {id}: priority {priority} is not one of {PRIORITIES:?}"
            ));
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"error": "RecordInvalid"}),
            );
        }
    }
    if let Some((edited, group, priority)) = account.edit_before_update.take() {
        edit(account, edited, group, priority);
    }
    let Some((current, status)) = account
        .tickets
        .get(&id)
        .map(|t| (t.updated_at(), t.status.clone()))
    else {
        return not_found();
    };
    if status == "closed" {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"error": "RecordInvalid", "description": "Record validation errors",
                   "details": {"status": [{"description": "Status: closed prevents ticket update"}]}}),
        );
    }
    if safe && stamp.as_deref() != Some(current.as_str()) {
        return (
            StatusCode::CONFLICT,
            json!({"error": "UpdateConflict", "description": "Safe Update prevented the update due to outdated ticket data. Please fetch the latest ticket data and try again."}),
        );
    }
    let strings = |name: &str| -> Vec<String> {
        fields
            .get(name)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let (added, removed) = (strings("additional_tags"), strings("remove_tags"));
    account.clock += 1;
    let clock = account.clock;
    let ticket = account.tickets.get_mut(&id).expect("looked up above");
    if let Some(group) = fields.get("group_id").and_then(Value::as_i64) {
        ticket.group_id = Some(group);
    }
    if let Some(priority) = fields.get("priority") {
        ticket.priority = priority.as_str().map(str::to_string);
    }
    ticket.tags.retain(|t| !removed.contains(t));
    for tag in added {
        if !ticket.tags.contains(&tag) {
            ticket.tags.push(tag);
        }
    }
    ticket.version = clock;
    (
        StatusCode::OK,
        json!({"ticket": ticket.json(), "audit": {"ticket_id": id}}),
    )
}

/// Cursor-based Incremental Ticket Export: a cursor here is `<start_time>.<offset>`.
fn export(account: &mut Account, query: &str) -> (StatusCode, Value) {
    let params: Vec<(&str, &str)> = query.split('&').filter_map(|p| p.split_once('=')).collect();
    let get = |name: &str| params.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let (start, offset) = match (get("start_time"), get("cursor")) {
        (Some(time), None) => match time.parse::<i64>() {
            Ok(time) => (time, 0),
            Err(_) => return bad(account, "start_time is not a Unix time"),
        },
        (None, Some(cursor)) => match cursor
            .split_once('.')
            .and_then(|(s, o)| Some((s.parse().ok()?, o.parse().ok()?)))
        {
            Some(at) => at,
            None => return bad(account, "not a cursor this account gave"),
        },
        _ => return bad(account, "exactly one of start_time and cursor"),
    };
    let mut changed: Vec<_> = account
        .tickets
        .values()
        .filter(|t| t.updated_unix() >= start)
        .cloned()
        .collect();
    changed.sort_by_key(|t| (t.version, t.id));
    let page: Vec<Value> = changed
        .iter()
        .skip(offset)
        .take(account.page_size)
        .map(|t| t.json())
        .collect();
    let next = offset + page.len();
    let cursor = format!("{start}.{next}");
    (
        StatusCode::OK,
        json!({
            "tickets": page, "after_cursor": cursor, "before_cursor": null,
            "after_url": format!("/api/v2/incremental/tickets/cursor.json?cursor={cursor}"),
            "end_of_stream": next >= changed.len(),
        }),
    )
}

fn bad(account: &mut Account, why: &str) -> (StatusCode, Value) {
    account.violations.push(format!("export: {why}"));
    (
        StatusCode::BAD_REQUEST,
        json!({"error": "InvalidPaginationParameter", "description": why}),
    )
}
