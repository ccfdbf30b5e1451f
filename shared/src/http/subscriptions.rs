//! `POST/GET /subscriptions`, `DELETE /subscriptions/{id}`, `POST /subscriptions/{id}/rotate`:
//! a caller's webhook endpoints, scoped like its tickets (another caller's subscription is a
//! 404). The secret is in the answer to creation and rotation only.

use axum::{
    body::Bytes,
    extract::{
        rejection::{BytesRejection, PathRejection, QueryRejection},
        Path, Query, State,
    },
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Deserialize;
use uuid::Uuid;

use super::{caller::SubscriptionAccess, tickets::require_json, AppState, Caller, Problem};
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
    caller.may_use_subscriptions(SubscriptionAccess::Write)?;
    require_json(&headers)?;
    let body = body.map_err(|rejection| Problem::new(rejection.status(), rejection.body_text()))?;
    let body: SubscriptionBody = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad_request(format!("invalid subscription: {e}")))?;
    if body.url.len() > MAX_URL_LEN {
        return Err(Problem::bad_request(format!(
            "url exceeds {MAX_URL_LEN} characters"
        )));
    }
    let created = match subscription::create(
        &state.pool,
        Some(caller.owner().as_str()),
        &body.url,
        body.include_text,
        &state.config.delivery,
    )
    .await?
    {
        subscription::Creation::Created(created) => created,
        subscription::Creation::AtLimit { limit } => {
            return Err(Problem::new(
                StatusCode::CONFLICT,
                format!(
                "you have {limit} subscriptions, the most one caller may have: delete one first"
            ),
            ))
        }
    };
    let location = format!("/subscriptions/{}", created.subscription.id);
    let mut response = (StatusCode::CREATED, Json(created)).into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// A page of the listing: `after` (the `next` of the page before), `limit` (1 to 100).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    after: Option<Uuid>,
    limit: Option<i64>,
}

/// The most, and the default, a page holds.
const PAGE_LIMIT: i64 = 100;

pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    caller.may_use_subscriptions(SubscriptionAccess::Read)?;
    let Query(page) = query.map_err(|r| Problem::bad_request(r.body_text()))?;
    let limit = page.limit.unwrap_or(PAGE_LIMIT);
    if !(1..=PAGE_LIMIT).contains(&limit) {
        return Err(Problem::bad_request(format!("limit: 1 to {PAGE_LIMIT}")));
    }
    let page = subscription::list(
        &state.pool,
        Some(caller.owner().as_str()),
        page.after,
        limit,
    )
    .await?;
    Ok(Json(page).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    caller.may_use_subscriptions(SubscriptionAccess::Write)?;
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
    caller.may_use_subscriptions(SubscriptionAccess::Write)?;
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
