//! What the HTTP adapters share: the client, the one request, the output schema, and the
//! mapping from transport failures and HTTP statuses to [`FailureKind`].
//!
//! Nothing here puts ticket text or the API key into a [`ProviderError`]: details are built
//! from the status and the provider's error type/code only, never its message (which may
//! quote the request).

use std::time::{Duration, Instant, SystemTime};

use reqwest::{
    header::{HeaderMap, RETRY_AFTER},
    Client, RequestBuilder, StatusCode, Url,
};
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use super::{
    rate_headers, ApiKey, EvaluationRequest, FailureKind, ModelOutput, Provider, ProviderConfig,
    ProviderError, ProviderReply, Usage,
};
use crate::secret::ExposeSecret;

/// What differs between the providers' HTTP APIs. Everything else — one request per call,
/// timeouts, the status table — is [`HttpProvider`]'s.
pub struct WireFormat {
    /// Name for the circuit breaker and the ledger.
    pub name: &'static str,
    /// Path under the configured base URL.
    pub path: &'static str,
    pub authorize: fn(RequestBuilder, &str) -> RequestBuilder,
    pub request_body: fn(&EvaluationRequest<'_>) -> Value,
    /// A 200 whose body is not the expected shape is still a billed answer: `NotJson`.
    pub parse_reply: fn(&[u8]) -> (ModelOutput, Usage),
    pub error_signals: fn(&ErrorInfo) -> ErrorSignals,
}

/// A provider reached over HTTP with JSON bodies.
pub struct HttpProvider {
    wire: &'static WireFormat,
    /// Built on the first call, then reused by every call of the container: loading the
    /// system trust store takes tens of milliseconds we keep off the Lambda init path.
    client: OnceCell<Client>,
    call_timeout: Duration,
    endpoint: Url,
    api_key: ApiKey,
}

impl HttpProvider {
    pub fn new(
        wire: &'static WireFormat,
        config: &ProviderConfig,
        call_timeout: Duration,
    ) -> Result<Self, ProviderError> {
        Ok(Self {
            wire,
            client: OnceCell::new(),
            call_timeout,
            endpoint: endpoint(&config.url, wire.path)?,
            api_key: config.api_key.clone(),
        })
    }
}

impl Provider for HttpProvider {
    fn name(&self) -> &'static str {
        self.wire.name
    }

    async fn evaluate(
        &self,
        request: EvaluationRequest<'_>,
    ) -> Result<ProviderReply, ProviderError> {
        let client = self
            .client
            .get_or_try_init(|| async { build_client(self.call_timeout) })
            .await?;
        let started = Instant::now();
        let (key_generation, key) = self.api_key.current();
        let http = (self.wire.authorize)(client.post(self.endpoint.clone()), key.expose_secret())
            .json(&(self.wire.request_body)(&request));
        let exchange = send(http, request.timeout).await?;
        if !exchange.status.is_success() {
            let signals = (self.wire.error_signals)(&ErrorInfo::parse(&exchange.body));
            let error = status_error(exchange.status, &exchange.headers, &signals);
            if error.kind == FailureKind::Unauthorized {
                // A rotated key: the next call (the breaker's probe) uses the new one. Bounded
                // by what is left of this call's time, so the worker's deadline still holds.
                let left = request.timeout.saturating_sub(started.elapsed());
                let _ = tokio::time::timeout(left, self.api_key.refused(key_generation)).await;
            }
            return Err(error);
        }
        let (output, usage) = (self.wire.parse_reply)(&exchange.body);
        Ok(ProviderReply {
            output,
            usage,
            http_status: exchange.status.as_u16(),
            rate: rate_headers::read(&exchange.headers, SystemTime::now()),
        })
    }
}

/// Upper bound on connection setup, so a black-holed host fails fast even with a long
/// call timeout.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

fn build_client(call_timeout: Duration) -> Result<Client, ProviderError> {
    crate::tls::https_client_builder()
        .connect_timeout(call_timeout.min(MAX_CONNECT_TIMEOUT))
        // Every billed call must be one recorded attempt: the outbox owns retries. reqwest
        // 0.13 retries protocol NACKs by default, and a redirect would be a second request.
        .retry(reqwest::retry::never())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|_| ProviderError::new(FailureKind::ConnectFailed, "HTTP client setup failed"))
}

/// `{base}/{path}`, checked at start-up so a bad URL never reaches a call.
fn endpoint(base: &str, path: &str) -> Result<Url, ProviderError> {
    Url::parse(&format!("{}/{path}", base.trim_end_matches('/'))).map_err(|_| {
        ProviderError::new(
            FailureKind::ConnectFailed,
            "provider URL is not a valid URL",
        )
    })
}

/// The answer schema both providers are forced into; the department enum is the policy's.
pub(super) fn output_schema(departments: &[String]) -> Value {
    let score = json!({"type": "number", "minimum": 0, "maximum": 1});
    json!({
        "type": "object",
        "properties": {
            "is_urgent": score,
            "department": {"type": "string", "enum": departments},
            "urgency_score": score,
        },
        "required": ["is_urgent", "department", "urgency_score"],
        "additionalProperties": false,
    })
}

/// A response the provider sent in full.
struct Exchange {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// Sends exactly one request and reads the whole body within `timeout`.
async fn send(request: RequestBuilder, timeout: Duration) -> Result<Exchange, ProviderError> {
    let response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| transport_error(&e, None))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|e| transport_error(&e, Some(status)))?;
    Ok(Exchange {
        status,
        headers,
        body: body.to_vec(),
    })
}

fn transport_error(error: &reqwest::Error, status: Option<StatusCode>) -> ProviderError {
    let (kind, detail) = if error.is_timeout() {
        (
            FailureKind::Timeout,
            "no complete answer before the call timeout",
        )
    } else if error.is_connect() {
        (
            FailureKind::ConnectFailed,
            "could not connect to the provider",
        )
    } else if status.is_some() {
        (
            FailureKind::ConnectionReset,
            "connection lost while reading the answer",
        )
    } else {
        (
            FailureKind::ConnectionReset,
            "connection closed before an answer",
        )
    };
    ProviderError {
        kind,
        http_status: status.map(|s| s.as_u16()),
        retry_after: None,
        detail: detail.into(),
    }
}

/// The error object both providers nest under `"error"`: OpenAI's `{type, code, message}`,
/// Anthropic's `{type, message}`. The message is only searched, never stored: it may quote
/// the request.
pub struct ErrorInfo {
    pub kind: Option<String>,
    pub code: Option<String>,
    message: String,
}

impl ErrorInfo {
    pub fn parse(body: &[u8]) -> Self {
        let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let error = &value["error"];
        let text = |v: &Value| v.as_str().map(str::to_owned);
        Self {
            kind: text(&error["type"]),
            code: text(&error["code"]),
            message: error["message"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase(),
        }
    }

    /// `needle` must be lowercase.
    pub fn message_mentions(&self, needle: &str) -> bool {
        self.message.contains(needle)
    }

    /// `type/code`, for `detail`.
    pub fn label(&self) -> Option<String> {
        match (&self.kind, &self.code) {
            (Some(kind), Some(code)) if kind != code => Some(format!("{kind}/{code}")),
            (Some(label), _) | (None, Some(label)) => Some(label.clone()),
            (None, None) => None,
        }
    }
}

/// What an adapter concluded from a provider's error body. Flags rather than text, so the
/// status mapping below is shared by both providers.
#[derive(Debug, Default)]
pub struct ErrorSignals {
    /// The provider's error type/code, for `detail`.
    pub label: Option<String>,
    /// The account cannot pay: every call would fail, unlike a rate limit.
    pub quota_exhausted: bool,
    pub context_length: bool,
    pub content_policy: bool,
}

/// Maps a non-success status to a failure; `Retry-After` is kept whenever it was sent
/// (429s and 503s in practice). A 429 without it is honoured until the provider's rate-limit
/// reset headers say the budget refills.
fn status_error(status: StatusCode, headers: &HeaderMap, signals: &ErrorSignals) -> ProviderError {
    let code = status.as_u16();
    let kind = match code {
        402 => FailureKind::QuotaExhausted,
        400 | 422 | 429 if signals.quota_exhausted => FailureKind::QuotaExhausted,
        429 => FailureKind::RateLimited,
        401 | 403 => FailureKind::Unauthorized,
        404 => FailureKind::ModelNotFound,
        408 | 409 => FailureKind::ServerError,
        400..=499 if signals.context_length => FailureKind::ContextLength,
        400..=499 if signals.content_policy => FailureKind::ContentPolicy,
        400..=499 => FailureKind::InvalidRequest,
        // 5xx, Anthropic's 529, and anything unexpected (a 3xx from a misconfigured URL):
        // transient, and a run of them trips the outage breaker.
        _ => FailureKind::ServerError,
    };
    let detail = match signals.label.as_deref().filter(|l| is_identifier(l)) {
        Some(label) => format!("HTTP {code} {label}"),
        None => format!("HTTP {code}"),
    };
    let now = SystemTime::now();
    let reset = || match kind {
        FailureKind::RateLimited => rate_headers::read(headers, now).longest_reset,
        _ => None,
    };
    ProviderError {
        kind,
        http_status: Some(code),
        retry_after: retry_after(headers, now).or_else(reset),
        detail,
    }
}

/// Error types and codes are short identifiers; anything else is left out of `detail` so it
/// cannot carry request text.
fn is_identifier(label: &str) -> bool {
    label.len() <= 80
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}

/// `Retry-After` as delta-seconds (fractions accepted) or an HTTP-date relative to `now`.
pub(super) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn with_retry_after(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn retry_after_reads_whole_and_fractional_seconds() {
        let now = SystemTime::now();
        assert_eq!(
            retry_after(&with_retry_after("7"), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&with_retry_after(" 0.25 "), now),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn retry_after_reads_an_http_date_relative_to_now() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            retry_after(&with_retry_after("Sun, 06 Nov 1994 08:50:07 GMT"), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after(&with_retry_after("Sun, 06 Nov 1994 08:49:00 GMT"), now),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn retry_after_ignores_garbage_and_negative_values() {
        let now = SystemTime::now();
        assert_eq!(retry_after(&with_retry_after("soon"), now), None);
        assert_eq!(retry_after(&with_retry_after("-3"), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn status_mapping_follows_the_failure_table() {
        let none = ErrorSignals::default();
        let kind = |status: u16, signals: &ErrorSignals| {
            status_error(
                StatusCode::from_u16(status).unwrap(),
                &HeaderMap::new(),
                signals,
            )
            .kind
        };
        let quota = ErrorSignals {
            quota_exhausted: true,
            ..ErrorSignals::default()
        };
        let context = ErrorSignals {
            context_length: true,
            ..ErrorSignals::default()
        };
        let policy = ErrorSignals {
            content_policy: true,
            ..ErrorSignals::default()
        };
        assert_eq!(kind(429, &none), FailureKind::RateLimited);
        assert_eq!(kind(429, &quota), FailureKind::QuotaExhausted);
        assert_eq!(kind(402, &none), FailureKind::QuotaExhausted);
        assert_eq!(kind(401, &none), FailureKind::Unauthorized);
        assert_eq!(kind(403, &none), FailureKind::Unauthorized);
        assert_eq!(kind(404, &none), FailureKind::ModelNotFound);
        assert_eq!(kind(400, &context), FailureKind::ContextLength);
        assert_eq!(kind(422, &context), FailureKind::ContextLength);
        assert_eq!(kind(400, &policy), FailureKind::ContentPolicy);
        assert_eq!(kind(400, &none), FailureKind::InvalidRequest);
        assert_eq!(kind(422, &none), FailureKind::InvalidRequest);
        for status in [408, 409, 500, 502, 503, 504, 529] {
            assert_eq!(kind(status, &none), FailureKind::ServerError, "{status}");
        }
    }

    #[test]
    fn detail_names_the_provider_error_but_drops_anything_that_is_not_an_identifier() {
        let body = json!({"error": {
            "type": "invalid_request_error",
            "code": "bad_param",
            "message": "Subject: hunter2",
        }});
        let info = ErrorInfo::parse(body.to_string().as_bytes());
        let signals = ErrorSignals {
            label: info.label(),
            ..ErrorSignals::default()
        };
        let error = status_error(StatusCode::BAD_REQUEST, &HeaderMap::new(), &signals);
        assert_eq!(error.detail, "HTTP 400 invalid_request_error/bad_param");

        let signals = ErrorSignals {
            label: Some("Subject: my password is hunter2".into()),
            ..ErrorSignals::default()
        };
        let error = status_error(StatusCode::BAD_REQUEST, &HeaderMap::new(), &signals);
        assert_eq!(error.detail, "HTTP 400");
    }
}
