//! `POST/GET /subscriptions`, `DELETE /subscriptions/{id}`, `POST /subscriptions/{id}/rotate`:
//! a caller's webhook endpoints, scoped like its tickets (another caller's subscription is a
//! 404). The secret is in the answer to creation and rotation only.

use axum::{
    body::Bytes,
    extract::{
        rejection::{BytesRejection, PathRejection},
        Path, State,
    },
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::{tickets::require_json, AppState, Caller, Problem};
use crate::pipeline::delivery::subscription;

/// Longest accepted endpoint URL.
const MAX_URL_LEN: usize = 2048;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscriptionBody {
    url: String,
    /// Whether events carry the ticket's subject and message (off by default).
    #[serde(default)]
    include_text: bool,
}

pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    require_json(&headers)?;
    let body = body.map_err(|rejection| Problem::new(rejection.status(), rejection.body_text()))?;
    let body: SubscriptionBody = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad_request(format!("invalid subscription: {e}")))?;
    if body.url.len() > MAX_URL_LEN {
        return Err(Problem::bad_request(format!(
            "url exceeds {MAX_URL_LEN} characters"
        )));
    }
    let created = subscription::create(
        &state.pool,
        Some(caller.owner().as_str()),
        &body.url,
        body.include_text,
        &state.config.delivery.allowed_hosts,
    )
    .await?;
    let location = format!("/subscriptions/{}", created.subscription.id);
    let mut response = (StatusCode::CREATED, Json(created)).into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Response, Problem> {
    let subscriptions = subscription::list(&state.pool, Some(caller.owner().as_str())).await?;
    Ok(Json(json!({ "subscriptions": subscriptions })).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    let id = parse_id(id)?;
    if subscription::delete(&state.pool, Some(caller.owner().as_str()), id).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(not_found(id))
    }
}

pub async fn rotate(
    State(state): State<AppState>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    let id = parse_id(id)?;
    match subscription::rotate(&state.pool, Some(caller.owner().as_str()), id).await? {
        Some(rotated) => Ok(Json(rotated).into_response()),
        None => Err(not_found(id)),
    }
}

fn parse_id(id: Result<Path<String>, PathRejection>) -> Result<Uuid, Problem> {
    id.ok()
        .and_then(|Path(id)| id.parse().ok())
        .ok_or_else(|| Problem::bad_request("subscription id must be a UUID"))
}

fn not_found(id: Uuid) -> Problem {
    Problem::not_found(format!("no subscription with id {id}"))
}
