//! `POST /connectors/zendesk/events` (docs/zendesk.md): Zendesk's webhook, authenticated by
//! its signature alone (no authorizer in front). Without a configured signing secret the
//! route does not exist (404); a missing, wrong or stale signature is a 401 and nothing is
//! read; a verified event is handed to `pipeline::zendesk` and answered 200 once stored.
//! Zendesk does not retry a 401, so a signature that does not match is first checked against
//! the secret the current one replaced (within `SIGNING_SECRET_OVERLAP`), then against the
//! secret read again (a reset in Zendesk; at most once a minute), before it is refused.

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

use super::{AppState, Problem};
use crate::{
    connectors::zendesk::{
        events,
        signature::{self, Refused},
        SIGNING_SECRET_OVERLAP,
    },
    pipeline::zendesk::{self, Desk, Received},
    secret::{Credential, ExposeSecret, Secret},
};

pub async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    let config = &state.config;
    let Some(secret) = &config.zendesk.webhook_secret else {
        return Err(Problem::not_found("no such resource"));
    };
    verify(secret, &headers, &body).await.map_err(|why| {
        tracing::warn!(%why, "Zendesk event refused");
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "the Zendesk webhook signature is missing, does not match, or is outside the replay window",
        )
    })?;
    let event = events::parse(&body).map_err(Problem::unprocessable)?;
    let versions = state.live.versions(&state.pool, &config.versions).await?;
    let desk = Desk {
        pool: &state.pool,
        versions: &versions,
        limits: &config.limits,
        write_back: config.zendesk.url.is_some(),
    };
    let answer = match zendesk::receive(desk, &event).await? {
        Received::Created(id) => json!({"received": "created", "ticket_id": id}),
        Received::AlreadyHere => json!({"received": "already here"}),
        Received::Corrected => json!({"received": "feedback"}),
        Received::Kept => json!({"received": "kept"}),
        Received::Ignored(why) => json!({"received": "ignored", "why": why}),
    };
    Ok((StatusCode::OK, Json(answer)).into_response())
}

/// The signature checked with the current signing secret, then with the one it replaced (if
/// that was within the overlap), then, only when it does not match, with the secret re-read.
async fn verify(secret: &Credential, headers: &HeaderMap, body: &[u8]) -> Result<(), Refused> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now();
    let check = |secret: &Secret| {
        signature::verify(
            secret.expose_secret().as_bytes(),
            header(signature::SIGNATURE_HEADER),
            header(signature::TIMESTAMP_HEADER),
            body,
            now,
        )
    };
    let (generation, current) = secret.current();
    match check(&current) {
        Err(Refused::Mismatch) => {}
        verified => return verified,
    }
    if let Some(replaced) = secret.replaced_within(SIGNING_SECRET_OVERLAP) {
        match check(&replaced) {
            Err(Refused::Mismatch) => {}
            verified => return verified,
        }
    }
    if secret.refused(generation).await {
        return check(&secret.current().1);
    }
    Err(Refused::Mismatch)
}
