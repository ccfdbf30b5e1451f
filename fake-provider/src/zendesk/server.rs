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
    // An API token is the account's: it authenticates as any user the email names.
    let as_user = |email: &str| {
        format!(
            "Basic {}",
            STANDARD.encode(format!("{email}/token:{}", account.token))
        )
    };
    let given = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let role = if given == Some(as_user(&shared.email).as_str()) {
        Some(Role::Agent)
    } else if given == Some(as_user(super::ADMIN_EMAIL).as_str()) {
        Some(Role::Admin)
    } else {
        None
    };
    let (status, answer, retry_after) = if role.is_none() {
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
    } else if let Some(seconds) = (parts.method == Method::PUT && ticket_id(&path).is_some())
        .then(|| update_refused(&mut account))
        .flatten()
    {
        (
            StatusCode::TOO_MANY_REQUESTS,
            json!({"error": "APIRateLimitExceeded"}),
            Some(seconds),
        )
    } else {
        let role = role.unwrap_or(Role::Agent);
        let (status, answer) = route(
            &mut account,
            &shared,
            role,
            &parts.method,
            &path,
            &query,
            &body,
        );
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

/// Zendesk's Update Ticket limit, 100 a minute per account (agents' saves included).
const UPDATES_PER_MINUTE: u32 = 100;

/// The Retry-After of a 429 to this update, or `None` when it may go (and is counted).
fn update_refused(account: &mut Account) -> Option<u32> {
    if let Some(seconds) = account.update_throttle.pop_front() {
        return Some(seconds);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let minute = now / 60;
    if account.updates_in_minute.0 != minute {
        account.updates_in_minute = (minute, 0);
    }
    if account.updates_in_minute.1 >= UPDATES_PER_MINUTE {
        return Some((60 - now % 60) as u32);
    }
    account.updates_in_minute.1 += 1;
    None
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

/// Who a request authenticated as: the connector's agent, or an admin (`ADMIN_EMAIL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Agent,
    Admin,
}

fn route(
    account: &mut Account,
    shared: &Shared,
    role: Role,
    method: &Method,
    path: &str,
    query: &str,
    body: &Value,
) -> (StatusCode, Value) {
    match (method, path) {
        (&Method::GET, "/api/v2/users/me.json") => (
            StatusCode::OK,
            match role {
                Role::Agent => json!({"user": {"id": shared.api_user, "role": "agent"}}),
                Role::Admin => json!({"user": {"id": shared.api_user + 1, "role": "admin"}}),
            },
        ),
        // "Allowed for: Admins" (Incremental Exports).
        (&Method::GET, "/api/v2/incremental/tickets/cursor.json") if role != Role::Admin => (
            StatusCode::FORBIDDEN,
            json!({"error": "Forbidden", "description": "You do not have access to this page. Please contact the account owner of this help desk for further help."}),
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
    // A cursor is a place in the account's history (the last ticket's change and id), as
    // Zendesk's are: a ticket changed after it comes again, and none is skipped.
    let (start, after) = match (get("start_time"), get("cursor")) {
        (Some(time), None) => match time.parse::<i64>() {
            Ok(time) => (time, None),
            Err(_) => return bad(account, "start_time is not a Unix time"),
        },
        (None, Some(cursor)) => {
            let parts: Vec<i64> = cursor.split('.').filter_map(|p| p.parse().ok()).collect();
            match parts[..] {
                [start, version, id] => (start, Some((version as u32, id))),
                [start] => (start, None),
                _ => return bad(account, "not a cursor this account gave"),
            }
        }
        _ => return bad(account, "exactly one of start_time and cursor"),
    };
    let mut changed: Vec<_> = account
        .tickets
        .values()
        .filter(|t| t.updated_unix() >= start && after.is_none_or(|a| (t.version, t.id) > a))
        .cloned()
        .collect();
    changed.sort_by_key(|t| (t.version, t.id));
    let page: Vec<_> = changed.iter().take(account.page_size).collect();
    let cursor = match page.last() {
        Some(last) => format!("{start}.{}.{}", last.version, last.id),
        None => match after {
            Some((version, id)) => format!("{start}.{version}.{id}"),
            None => start.to_string(),
        },
    };
    let end_of_stream = page.len() >= changed.len();
    let page: Vec<Value> = page.iter().map(|t| t.json()).collect();
    (
        StatusCode::OK,
        json!({
            "tickets": page, "after_cursor": cursor, "before_cursor": null,
            "after_url": format!("/api/v2/incremental/tickets/cursor.json?cursor={cursor}"),
            "end_of_stream": end_of_stream,
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
