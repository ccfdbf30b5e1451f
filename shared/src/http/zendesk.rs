//! `POST /connectors/zendesk/events` (docs/zendesk.md): Zendesk's webhook, authenticated by
//! its signature alone (no authorizer in front). Without a configured signing secret the
//! route does not exist (404); a missing, wrong or stale signature is a 401 and nothing is
//! read; a verified event is handed to `pipeline::zendesk` and answered 200 once stored.

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
    connectors::zendesk::{events, signature},
    pipeline::zendesk::{self, Desk, Received},
    secret::ExposeSecret,
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
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    signature::verify(
        secret.expose_secret().as_bytes(),
        header(signature::SIGNATURE_HEADER),
        header(signature::TIMESTAMP_HEADER),
        &body,
        chrono::Utc::now(),
    )
    .map_err(|why| {
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
