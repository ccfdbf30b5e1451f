//! The HTTP side: hyper's HTTP/1 connection driven by hand, so a scripted reset can take
//! the socket back from hyper and drop it with a RST.

use std::{convert::Infallible, sync::Arc, time::Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{
    body::Incoming, header, server::conn::http1, service::service_fn, Method, Request, Response,
    StatusCode,
};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{oneshot, Notify},
    task::JoinSet,
};

use crate::{
    batch,
    render::{self, Call, Reply},
    strict, Api, Behavior, CallRecord, Script, Shared,
};

/// Accepts until `stopped` fires (or its sender is dropped), then aborts every connection.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                // A failed accept (e.g. the peer already left) concerns that peer only.
                if let Ok((stream, _)) = accepted {
                    connections.spawn(serve_connection(stream, shared.clone()));
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let reset = Arc::new(Notify::new());
    let service = {
        let reset = reset.clone();
        service_fn(move |request| handle(request, shared.clone(), reset.clone()))
    };
    let mut connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = &mut connection => {}
        _ = reset.notified() => {
            let stream = connection.into_parts().io.into_inner();
            // Zero linger makes the close a RST: the client sees a reset, not a clean end.
            let _ = stream.set_zero_linger();
        }
    }
}

async fn handle(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    reset: Arc<Notify>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let at = Instant::now();
    if let Some(route) = batch::route(request.method(), request.uri()) {
        let (parts, body) = request.into_parts();
        let body = read_body(body).await;
        let (status, body) = batch::handle(route, &parts.headers, &body, &shared);
        return Ok(respond(status, None, body, &[]));
    }
    let api = match (request.method(), request.uri().path()) {
        (&Method::POST, "/v1/chat/completions") => Api::OpenAi,
        (&Method::POST, "/v1/messages") => Api::Anthropic,
        _ => {
            let body = r#"{"error": {"type": "not_found_error", "message": "unknown route"}}"#;
            return Ok(respond(
                StatusCode::NOT_FOUND,
                None,
                Bytes::from_static(body.as_bytes()),
                &[],
            ));
        }
    };
    let (parts, body) = request.into_parts();
    let body = read_body(body).await;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut call = Call::read(api, &body);
    let flex = body["service_tier"] == "flex";
    // A request that is not JSON never reaches the model, so it leaves the script alone.
    let verdict = shared.limit().as_mut().map(|bucket| bucket.take(at));
    let behavior = {
        let mut script = shared.script();
        // Like the real APIs: the key is checked before the body is looked at.
        if key_refused(&script, api, &parts.headers) {
            Behavior::Unauthorized
        } else if let Some(refused) = script.strict.then(|| strict::check(api, &body)).flatten() {
            refused
        } else if !body.is_object() {
            Behavior::InvalidRequest
        } else if let Some(retry_after) = verdict.as_ref().and_then(|v| v.refused) {
            Behavior::RateLimited {
                retry_after: Some(retry_after),
            }
        } else if flex {
            script.next_flex(&call.ticket_text, &call.model)
        } else {
            script.behavior(&call.ticket_text, &call.model)
        }
    };
    // Only OpenAI's API speaks these header names.
    let rate_headers = match (verdict, api) {
        (Some(verdict), Api::OpenAi) => verdict.headers,
        _ => Vec::new(),
    };
    let (delay, gates, behavior) = behavior.split();
    call.usage = shared.usage(&call);
    let reply = render::reply(&behavior, api, &call);
    let status = match &reply {
        Reply::Send { status, .. } => status.as_u16(),
        Reply::Reset | Reply::Hang => 0,
    };
    shared.record(CallRecord {
        ticket_text: call.ticket_text,
        api,
        model: call.model,
        status,
        billed: status == 200,
        at,
        body,
        batch: None,
        usage: call.usage,
        headers: parts.headers,
    });
    // Held (recorded by then) until the test releases each gate.
    for gate in &gates {
        gate.pass().await;
    }
    // From the request's arrival, as a client would time it: reading and recording the
    // request is part of the provider's latency, not added to it.
    tokio::time::sleep_until((at + delay).into()).await;
    match reply {
        Reply::Send {
            status,
            retry_after,
            body,
        } => Ok(respond(status, retry_after, body, &rate_headers)),
        Reply::Reset => {
            reset.notify_one();
            std::future::pending().await
        }
        Reply::Hang => std::future::pending().await,
    }
}

/// Whether the request's API key (bearer token for OpenAI, `x-api-key` for Anthropic) is
/// other than the only one accepted, when one is set.
pub(crate) fn key_refused(script: &Script, api: Api, headers: &hyper::HeaderMap) -> bool {
    let key = match api {
        Api::OpenAi => {
            header_value(headers, "authorization").and_then(|value| value.strip_prefix("Bearer "))
        }
        Api::Anthropic => header_value(headers, "x-api-key"),
    };
    script
        .accepted_key
        .as_deref()
        .is_some_and(|accepted| key != Some(accepted))
}

/// The whole body; one the client failed to send in full reads as empty (not JSON).
async fn read_body(body: Incoming) -> Bytes {
    body.collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default()
}

pub(crate) fn header_value<'a>(headers: &'a hyper::HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok()
}

pub(crate) fn respond(
    status: StatusCode,
    retry_after: Option<String>,
    body: Bytes,
    extra: &[(&'static str, String)],
) -> Response<Full<Bytes>> {
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json");
    for (name, value) in extra {
        response = response.header(*name, value);
    }
    if let Some(retry_after) = retry_after {
        response = response.header(header::RETRY_AFTER, retry_after);
    }
    response
        .body(Full::new(body))
        .expect("status and headers are valid")
}
