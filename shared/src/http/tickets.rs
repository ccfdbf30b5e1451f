//! `POST /tickets`, `GET /tickets/{id}`, `POST` and `GET /tickets/{id}/feedback`: parse, validate,
//! call `ingest` / `read` / `feedback`, map.

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

use super::{rate, AppState, Caller, Problem};
use crate::{
    config::Limits,
    domain::ticket::TicketId,
    pipeline::{
        feedback::{self, Labels},
        ingest::{self, NewTicket, Outcome, Submitter},
        reads::{self, read},
        taxonomy,
    },
};

const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Longest accepted `Idempotency-Key` header value.
const MAX_REQUEST_KEY_LEN: usize = 255;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TicketBody {
    subject: String,
    message: String,
}

pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let config = &state.config;
    let (ticket, request_key) = match accepted(&headers, body, &config.limits) {
        Ok(accepted) => accepted,
        // Refused before ingest, which counts the rest: counted here, and past the rate its 429.
        Err(refusal) => return Err(rate::count(&state, &caller).await.err().unwrap_or(refusal)),
    };
    let submitter = Submitter {
        owner: &caller.owner(),
        daily_quota: config.limits.caller_daily_tickets,
        rate_per_minute: config.limits.caller_rpm,
        dedup_hold: config.limits.dedup_hold,
    };
    let versions = state.live.versions(&state.pool, &config.versions).await?;
    let outcome = match request_key {
        None => ingest::create_ticket(&state.pool, &versions, &ticket, submitter).await?,
        Some(key) => {
            // Counted before the key is looked up: a replay counts too.
            rate::count(&state, &caller).await?;
            let submitter = Submitter {
                rate_per_minute: None,
                ..submitter
            };
            ingest::create_ticket_keyed(
                &state.pool,
                &versions,
                &ticket,
                submitter,
                &caller.scope(key),
                config.limits.idempotency_key_ttl,
            )
            .await?
        }
    };
    let (status, body) = match outcome {
        Outcome::Created(created) => (StatusCode::CREATED, created.body()),
        Outcome::Replay { status, body } => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::CREATED),
            body,
        ),
        Outcome::Mismatch => {
            return Err(Problem::unprocessable(
                "Idempotency-Key was already used with a different request body",
            ))
        }
        Outcome::OverQuota { retry_after } => {
            return Err(Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this caller created its {} tickets for today (UTC); retry after 00:00 UTC",
                    config.limits.caller_daily_tickets.unwrap_or_default()
                ),
            )
            .retry_after(retry_after))
        }
        Outcome::RateLimited { retry_after } => {
            let limit = config.limits.caller_rpm.unwrap_or_default();
            return Err(rate::too_many(limit, retry_after));
        }
    };
    let location = body["id"]
        .as_str()
        .map(|id| format!("/tickets/{id}"))
        .unwrap_or_default();
    let mut response = (status, Json(body)).into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// The ticket and its `Idempotency-Key` of a request that is JSON of the right shape and size.
fn accepted<'h>(
    headers: &'h HeaderMap,
    body: Result<Bytes, BytesRejection>,
    limits: &Limits,
) -> Result<(NewTicket, Option<&'h str>), Problem> {
    require_json(headers)?;
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body exceeds {} bytes", limits.max_body_bytes),
        ),
        status => Problem::new(status, rejection.body_text()),
    })?;
    Ok((parse_ticket(&body, limits)?, request_key(headers)?))
}

pub async fn show(
    State(state): State<AppState>,
    // Refuses a request through API Gateway without a principal, as `create` does.
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    let id = ticket_id(id)?;
    // Another caller's ticket is answered like one that does not exist: 404, never 403.
    let owner = caller.reads();
    let versions = state
        .live
        .versions(&state.pool, &state.config.versions)
        .await?;
    match read::find(&state.pool, &versions, id, owner.as_deref()).await? {
        Some(view) => Ok(Json(view).into_response()),
        None => Err(Problem::not_found(format!("no ticket with id {id}"))),
    }
}

/// A ticket's labels, newest first, each with its source; 404 for another caller's ticket.
pub async fn feedback_history(
    State(state): State<AppState>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, Problem> {
    let id = ticket_id(id)?;
    let owner = caller.reads();
    let client = crate::db::client(&state.pool).await?;
    match reads::feedback::history(&client, id, owner.as_deref()).await? {
        Some(history) => Ok(Json(history).into_response()),
        None => Err(Problem::not_found(format!("no ticket with id {id}"))),
    }
}

/// The help desk's labels for a ticket it can read; a later one replaces this one.
pub async fn give_feedback(
    State(state): State<AppState>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    caller.may_give_feedback()?;
    let id = ticket_id(id)?;
    require_json(&headers)?;
    let body = body.map_err(|rejection| Problem::new(rejection.status(), rejection.body_text()))?;
    let labels: Labels = serde_json::from_slice(&body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => Problem::unprocessable(format!("invalid feedback: {e}")),
            _ => Problem::bad_request(format!("request body is not valid JSON: {e}")),
        }
    })?;
    // The deployment's policy (SPEC: feedback is validated under TRIAGE_POLICY_VERSION).
    let configured = state.config.versions.policy.as_str();
    let client = crate::db::client(&state.pool).await?;
    let policy = taxonomy::policy(&client, configured).await?.map_err(|unusable| {
        tracing::error!(error = %unusable, "feedback refused: TRIAGE_POLICY_VERSION cannot be loaded");
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the deployment's taxonomy cannot be loaded",
        )
    })?;
    drop(client);
    if !policy.departments.contains(&labels.department) {
        return Err(Problem::unprocessable(format!(
            "department {:?} is not one of {}",
            labels.department,
            policy.departments.join(", ")
        )));
    }
    let owner = caller.reads();
    let given_by = caller.owner();
    let giver = feedback::Giver {
        owner: owner.as_deref(),
        given_by: &given_by,
        urgent_threshold: policy.urgent_threshold,
        history: state.config.limits.feedback_history,
        labeller: caller.may_label(&state.config.labelling.labellers),
    };
    match feedback::give(&state.pool, id, &(&labels).into(), giver).await? {
        Some(given) => Ok(Json(given).into_response()),
        None => Err(Problem::not_found(format!("no ticket with id {id}"))),
    }
}

/// A path's ticket id: one that is not even valid UTF-8 (`%FF`) is as malformed as one that
/// is not a UUID.
fn ticket_id(id: Result<Path<String>, PathRejection>) -> Result<TicketId, Problem> {
    id.ok()
        .and_then(|Path(id)| id.parse().ok())
        .ok_or_else(|| Problem::bad_request("ticket id must be a UUID"))
}

pub(super) fn require_json(headers: &HeaderMap) -> Result<(), Problem> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json")) {
        Ok(())
    } else {
        Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ))
    }
}

fn request_key(headers: &HeaderMap) -> Result<Option<&str>, Problem> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .map_err(|_| Problem::bad_request("Idempotency-Key must be visible ASCII"))?
        .trim();
    // The draft sends the key as a structured-field string: "abc". Bare tokens are accepted too.
    let key = key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or(key);
    if key.is_empty() || key.len() > MAX_REQUEST_KEY_LEN {
        return Err(Problem::bad_request(format!(
            "Idempotency-Key must be 1 to {MAX_REQUEST_KEY_LEN} characters"
        )));
    }
    Ok(Some(key))
}

/// The validation rules of a ticket; each failure names the field and the rule.
fn parse_ticket(body: &[u8], limits: &Limits) -> Result<NewTicket, Problem> {
    let parsed: TicketBody = serde_json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            // Well-formed JSON of the wrong shape: missing field, wrong type, unknown field.
            Category::Data => Problem::unprocessable(format!("invalid ticket: {e}")),
            _ => Problem::bad_request(format!("request body is not valid JSON: {e}")),
        }
    })?;
    let subject = check_field("subject", parsed.subject, limits.max_subject_chars)?;
    let message = check_field("message", parsed.message, limits.max_message_chars)?;
    Ok(NewTicket { subject, message })
}

fn check_field(name: &str, value: String, max_chars: usize) -> Result<String, Problem> {
    if value.trim().is_empty() {
        return Err(Problem::unprocessable(format!("{name} must not be empty")));
    }
    if value.contains('\0') {
        return Err(Problem::unprocessable(format!(
            "{name} must not contain NUL characters"
        )));
    }
    let chars = value.chars().count();
    if chars > max_chars {
        return Err(Problem::unprocessable(format!(
            "{name} is {chars} characters long; the limit is {max_chars}"
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<NewTicket, Problem> {
        parse_ticket(body.as_bytes(), &Limits::default())
    }

    #[test]
    fn malformed_json_is_400_and_wrong_shape_is_422() {
        assert_eq!(parse("{").unwrap_err().status, StatusCode::BAD_REQUEST);
        assert_eq!(
            parse(r#"{"subject":"a"}"#).unwrap_err().status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            parse(r#"{"subject":1,"message":"b"}"#).unwrap_err().status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            parse(r#"[1]"#).unwrap_err().status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            parse(r#"{"subject":"a","message":"b","x":1}"#)
                .unwrap_err()
                .status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
    }

    #[test]
    fn empty_nul_and_oversized_fields_are_422() {
        for body in [
            r#"{"subject":"  ","message":"b"}"#.to_string(),
            r#"{"subject":"a","message":"b\u0000c"}"#.to_string(),
            format!(r#"{{"subject":"{}","message":"b"}}"#, "x".repeat(501)),
        ] {
            let problem = parse(&body).unwrap_err();
            assert_eq!(
                problem.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{body}: {}",
                problem.detail
            );
        }
    }

    #[test]
    fn invalid_utf8_is_400() {
        let body = b"{\"subject\":\"\xff\",\"message\":\"b\"}";
        assert_eq!(
            parse_ticket(body, &Limits::default()).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn limits_count_characters_not_bytes() {
        let subject = "é".repeat(500);
        assert!(parse(&format!(r#"{{"subject":"{subject}","message":"b"}}"#)).is_ok());
    }
}
