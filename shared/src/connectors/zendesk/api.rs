//! The Support API calls the connector makes, each one request (no redirects, no retries but
//! one after a 401 with a re-read token: what to do after a 409 or a 429 is the caller's
//! decision):
//! - Show Ticket, `GET /api/v2/tickets/{id}.json`, and Update Ticket,
//!   `PUT /api/v2/tickets/{id}.json` with `{"ticket": {...}}`: `additional_tags` /
//!   `remove_tags` change tags without replacing the agents', and `safe_update` with
//!   `updated_stamp` (the ticket's `updated_at` as read) makes Zendesk answer 409
//!   `UpdateConflict` instead of overwriting a change made since ("Tickets", "Protecting
//!   against ticket update collisions", developer.zendesk.com/api-reference/ticketing/tickets/tickets/);
//! - Show Self, `GET /api/v2/users/me.json`: the connector's own API user;
//! - Incremental Ticket Export, cursor based, `GET /api/v2/incremental/tickets/cursor.json`
//!   with `start_time` then `cursor` until `end_of_stream` ("Incremental Exports").
//!
//! Authentication is basic, `{email}/token:{api_token}` ("API token", Zendesk's Security and
//! authentication page). A 401 is what a revoked or rotated token looks like: the token's
//! secret is read again (at most once a minute) and the request sent once more if it changed
//! (within the caller's rate-limit slot: one extra request per rotation and container).
//! A 429 carries `Retry-After` in seconds ("Rate limits").

use std::time::Duration;

use base64::{engine::general_purpose::STANDARD, Engine};
use reqwest::{header, Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::secret::{Credential, ExposeSecret};

/// How a call failed. Never carries a response body (an answer may quote a ticket).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("Zendesk answered 429 (retry after {retry_after:?})")]
    RateLimited { retry_after: Option<Duration> },
    #[error("Zendesk answered 409: the ticket changed since it was read")]
    Conflict,
    #[error("Zendesk answered 404: no such ticket")]
    NotFound,
    /// The update is refused for this ticket, whenever it is sent: a closed ticket (merged
    /// ones are closed) answers `Status: closed prevents ticket update`.
    #[error("Zendesk answered 422: {0}")]
    Unprocessable(String),
    #[error("Zendesk answered {0}")]
    Status(u16),
    #[error("Zendesk could not be reached: {0}")]
    Transport(String),
    #[error("Zendesk's answer is not the documented shape: {0}")]
    Shape(String),
    #[error("TRIAGE_ZENDESK_URL is not a URL: {0}")]
    Url(String),
}

/// A ticket as the connector reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Ticket {
    pub id: i64,
    /// Zendesk's `updated_at` exactly as sent: the safe update's `updated_stamp`.
    pub updated_at: String,
    #[serde(default)]
    pub group_id: Option<i64>,
    #[serde(default)]
    pub priority: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

/// The `ticket` of an Update Ticket body; always a safe update.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Update {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_id: Option<i64>,
    /// `Some(None)` sends `null`: the priority emptied (Zendesk's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Option<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_tags: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove_tags: Vec<String>,
    pub safe_update: bool,
    pub updated_stamp: String,
}

/// Where an export starts: a time (the first page) or the cursor a page ended at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Start {
    Time(i64),
    Cursor(String),
}

/// One page of the export.
#[derive(Debug, Clone, Deserialize)]
pub struct Page {
    pub tickets: Vec<Ticket>,
    #[serde(default)]
    pub after_cursor: Option<String>,
    pub end_of_stream: bool,
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: reqwest::Url,
    email: String,
    token: Credential,
    /// Also bounds a token's re-read after a 401.
    timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(
        url: &str,
        email: &str,
        token: &Credential,
        timeout: Duration,
    ) -> Result<Self, ApiError> {
        let base = reqwest::Url::parse(url.trim_end_matches('/'))
            .map_err(|e| ApiError::Url(e.to_string()))?;
        let http = crate::tls::https_client_builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("triage-zendesk/1")
            .build()
            .map_err(|e| ApiError::Transport(e.to_string()))?;
        Ok(Self {
            http,
            base,
            email: email.to_string(),
            token: token.clone(),
            timeout,
        })
    }

    /// The account's host, which names its shared rate limit.
    pub fn host(&self) -> &str {
        self.base.host_str().unwrap_or("zendesk")
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<Value>,
    ) -> Result<Value, ApiError> {
        let mut url = self.base.clone();
        url.set_path(path);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let send = |token: &Credential| {
            let (generation, token) = token.current();
            let credentials = format!("{}/token:{}", self.email, token.expose_secret());
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .header(
                    header::AUTHORIZATION,
                    format!("Basic {}", STANDARD.encode(credentials)),
                )
                .header(header::ACCEPT, "application/json");
            if let Some(body) = &body {
                request = request.json(body);
            }
            async move {
                let response = request
                    .send()
                    .await
                    .map_err(|e| ApiError::Transport(e.without_url().to_string()))?;
                Ok::<_, ApiError>((generation, response))
            }
        };
        let (generation, mut response) = send(&self.token).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            let reread = tokio::time::timeout(self.timeout, self.token.refused(generation));
            if reread.await.unwrap_or(false) {
                response = send(&self.token).await?.1;
            }
        }
        match response.status() {
            status if status.is_success() => response
                .json()
                .await
                .map_err(|e| ApiError::Shape(e.without_url().to_string())),
            StatusCode::TOO_MANY_REQUESTS => Err(ApiError::RateLimited {
                retry_after: response
                    .headers()
                    .get(header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .and_then(|s| Duration::try_from_secs_f64(s).ok()),
            }),
            StatusCode::CONFLICT => Err(ApiError::Conflict),
            StatusCode::NOT_FOUND => Err(ApiError::NotFound),
            StatusCode::UNPROCESSABLE_ENTITY => Err(ApiError::Unprocessable(refusal(
                &response.json().await.unwrap_or_default(),
            ))),
            status => Err(ApiError::Status(status.as_u16())),
        }
    }

    pub async fn show(&self, ticket: i64) -> Result<Ticket, ApiError> {
        let answer = self
            .call(
                Method::GET,
                &format!("/api/v2/tickets/{ticket}.json"),
                &[],
                None,
            )
            .await?;
        field(answer, "ticket")
    }

    pub async fn update(&self, ticket: i64, update: &Update) -> Result<(), ApiError> {
        self.call(
            Method::PUT,
            &format!("/api/v2/tickets/{ticket}.json"),
            &[],
            Some(json!({ "ticket": update })),
        )
        .await
        .map(drop)
    }

    /// The connector's own user id.
    pub async fn me(&self) -> Result<i64, ApiError> {
        #[derive(Deserialize)]
        struct User {
            id: i64,
        }
        let answer = self
            .call(Method::GET, "/api/v2/users/me.json", &[], None)
            .await?;
        field::<User>(answer, "user").map(|user| user.id)
    }

    pub async fn export(&self, start: &Start) -> Result<Page, ApiError> {
        let query = match start {
            Start::Time(time) => ("start_time", time.to_string()),
            Start::Cursor(cursor) => ("cursor", cursor.clone()),
        };
        let answer = self
            .call(
                Method::GET,
                "/api/v2/incremental/tickets/cursor.json",
                &[query],
                None,
            )
            .await?;
        serde_json::from_value(answer).map_err(|e| ApiError::Shape(e.to_string()))
    }
}

/// What a 422 refused, quoting nothing of the ticket: the fields Zendesk's `details` name, and
/// Zendesk's own words for `status` alone ("Status: closed prevents ticket update").
fn refusal(body: &Value) -> String {
    let bounded = |text: &str| text.chars().take(120).collect::<String>();
    let Some(details) = body["details"].as_object() else {
        return bounded(body["error"].as_str().unwrap_or("no details"));
    };
    let fields: Vec<String> = details
        .iter()
        .map(|(field, errors)| match errors[0]["description"].as_str() {
            Some(said) if field == "status" => bounded(said),
            _ => format!("{} is invalid", bounded(field)),
        })
        .collect();
    fields.join("; ")
}

fn field<T: serde::de::DeserializeOwned>(mut answer: Value, name: &str) -> Result<T, ApiError> {
    serde_json::from_value(answer[name].take()).map_err(|e| ApiError::Shape(format!("{name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_is_a_safe_update_with_only_what_it_changes() {
        let update = Update {
            priority: Some(Some("urgent".into())),
            additional_tags: vec!["triage_billing".into()],
            safe_update: true,
            updated_stamp: "2026-12-04T10:00:00Z".into(),
            ..Update::default()
        };
        assert_eq!(
            json!({ "ticket": update }),
            json!({"ticket": {"priority": "urgent", "additional_tags": ["triage_billing"],
                              "safe_update": true, "updated_stamp": "2026-12-04T10:00:00Z"}})
        );
        let emptied = Update {
            priority: Some(None),
            ..Update::default()
        };
        assert_eq!(json!(emptied)["priority"], Value::Null);
        assert!(json!(emptied).as_object().unwrap().contains_key("priority"));
    }

    #[test]
    fn a_refusal_names_fields_and_quotes_only_zendesks_status_words() {
        let closed = json!({"error": "RecordInvalid", "description": "Record validation errors",
            "details": {"status": [{"description": "Status: closed prevents ticket update"}]}});
        assert_eq!(refusal(&closed), "Status: closed prevents ticket update");
        let other = json!({"error": "RecordInvalid",
            "details": {"subject": [{"description": "Subject: my card 4111 is too long"}]}});
        assert_eq!(refusal(&other), "subject is invalid");
        assert_eq!(refusal(&json!({"error": "RecordInvalid"})), "RecordInvalid");
    }
}
