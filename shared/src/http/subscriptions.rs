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
use crate::pipeline::delivery::{address, subscription};

/// Longest accepted endpoint URL, in characters.
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
    if body.url.chars().count() > MAX_URL_LEN {
        return Err(Problem::bad_request(format!(
            "url exceeds {MAX_URL_LEN} characters"
        )));
    }
    if !well_formed(&body.url) {
        // The address rules' own words where they refuse it too (credentials, scheme, ...).
        let why = match address::check_url(&body.url, &state.config.delivery.allowed_hosts) {
            Err(refused) => refused.to_string(),
            Ok(_) => URL_FORM.to_string(),
        };
        return Err(Problem::bad_request(format!("url: {why}")));
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

/// Why a URL of another form is refused (unless the address rules have their own words).
const URL_FORM: &str = "must be https://, a host name (or an IP address), an optional port, \
     then a path and query of letters, digits, `-._~!$&()*+,;=:@/?` and %XX escapes, without \
     fragment (openapi.yaml, NewSubscription.url)";

/// Whether `url` has the form of openapi.yaml's `NewSubscription.url` pattern, or one of the
/// two forms its description names besides, which the address rules ([`address::check_url`])
/// then judge: an IP-literal host (`1.2.3.4`, `[2001:db8::1]`), and `http://`. The pattern is
/// `https://` + dot-separated labels of letters and digits with single inner hyphens, the last
/// starting with a letter (a last label of digits makes a URL parser read an IPv4 address),
/// an optional port (0 to 65535), a path and a query. What a URL parser would also take (`*`
/// in a host, a fragment, `HTTPS://`, spaces it escapes) is refused: a string the pattern
/// admits is accepted, one it refuses is refused, but for those two named forms.
fn well_formed(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return false;
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let (host_ok, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((ip, port)) => (ip.parse::<std::net::Ipv6Addr>().is_ok(), port),
            None => return false,
        },
        None => {
            let (host, port) = match authority.find(':') {
                Some(at) => authority.split_at(at),
                None => (authority, ""),
            };
            (
                host.parse::<std::net::Ipv4Addr>().is_ok() || is_host_name(host),
                port,
            )
        }
    };
    let port_ok = match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => {
            (1..=5).contains(&digits.len())
                && digits.bytes().all(|b| b.is_ascii_digit())
                && digits.parse::<u16>().is_ok()
        }
    };
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    host_ok
        && port_ok
        && (path.is_empty() || path.starts_with('/'))
        && escapes_ok(path, b"/")
        && query.is_none_or(|query| escapes_ok(query, b"/?"))
}

/// Dot-separated labels of ASCII letters and digits, hyphens only between them, one at a
/// time; the last label starts with a letter.
fn is_host_name(host: &str) -> bool {
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .split('-')
                .all(|run| !run.is_empty() && run.bytes().all(|b| b.is_ascii_alphanumeric()))
    };
    host.split('.').all(label_ok)
        && host
            .rsplit('.')
            .next()
            .is_some_and(|last| last.starts_with(|c: char| c.is_ascii_alphabetic()))
}

/// Only the pattern's characters (unreserved, sub-delims, `:`, `@`, and `extra`), a `%` only
/// before two hex digits.
fn escapes_ok(text: &str, extra: &[u8]) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            if !bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
            {
                return false;
            }
            i += 3;
            continue;
        }
        if !(b.is_ascii_alphanumeric() || b"-._~!$&()*+,;=:@".contains(&b) || extra.contains(&b)) {
            return false;
        }
        i += 1;
    }
    true
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_of_the_specs_form_is_well_formed_and_passes_the_address_rules() {
        let long_host = format!("https://{}.example/hook", "a".repeat(2000));
        for url in [
            "https://helpdesk.example.com/hooks/triage",
            "https://a",
            "https://localhost",
            "https://A-1.b2-C.Example:65535/p/a/t/h;x=1?q=1&r=/s?t",
            "https://a.b0:0",
            "https://a.com:00080/",
            "https://a.com/%2F%aa?x=%41",
            "https://a.com?",
            "https://a.com/~._-!$&()*+,;=:@",
            long_host.as_str(),
        ] {
            assert!(well_formed(url), "{url}");
            assert!(address::check_url(url, &[]).is_ok(), "{url}");
        }
    }

    #[test]
    fn what_a_url_parser_also_takes_is_not_well_formed_but_the_two_named_extras_are() {
        for url in [
            "https://A*",
            "https://a.com#fragment",
            "HTTPS://a.com",
            "https://a.com/with space",
            "https://a.com/%zz",
            "https://a.com/%4",
            "https://a.com:",
            "https://a.com:65536",
            "https://a.com:123456",
            "https://a--b.com",
            "https://-a.com",
            "https://a-.com",
            "https://a..com",
            "https://a.com.",
            "https://a.1",
            "https://8.8",
            "https://0x8.8.8.8",
            "https://08.8.8.8",
            "https://user@a.com",
            "https://a.com/'quote'",
            "https://[::1",
            "https://[v1.x]",
            "https://é.example",
            "ftp://a.com",
            "0000",
            "",
        ] {
            assert!(!well_formed(url), "{url}");
        }
        for url in [
            "https://8.8.8.8/hook",
            "https://[2001:4860::1]:8443/hook",
            "http://127.0.0.1:9/hook",
            "http://localhost:9/hook?x=1",
        ] {
            assert!(well_formed(url), "{url}");
        }
    }
}
