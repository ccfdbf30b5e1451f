//! What a provider's error answer means: the status, the error body's type, code and named
//! parameter, and `Retry-After`, mapped to a [`FailureKind`] by one table shared by both
//! adapters (each adapter reads its own body into [`ErrorSignals`]).
//!
//! Nothing here puts ticket text into a [`ProviderError`]: details are built from the status
//! and the provider's error type/code only, never its message (which may quote the request).

use std::time::{Duration, SystemTime};

use reqwest::{
    header::{HeaderMap, RETRY_AFTER},
    StatusCode,
};
use serde_json::Value;

use super::{rate_headers, FailureKind, ProviderError};

/// The error object both providers nest under `"error"`: OpenAI's `{type, code, message}`,
/// Anthropic's `{type, message}`. The message is only searched, never stored: it may quote
/// the request.
pub struct ErrorInfo {
    pub kind: Option<String>,
    pub code: Option<String>,
    /// The request parameter the provider names: OpenAI's `param`, else the path Anthropic
    /// puts before the message (`tools.0.input_schema: ...`).
    param: Option<String>,
    message: String,
}

impl ErrorInfo {
    pub fn parse(body: &[u8]) -> Self {
        let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let error = &value["error"];
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let message = error["message"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let leading_path = message
            .split_once(": ")
            .map(|(path, _)| path)
            .filter(|path| !path.is_empty() && !path.contains(' '))
            .map(str::to_owned);
        Self {
            kind: text(&error["type"]),
            code: text(&error["code"]),
            param: text(&error["param"]).or(leading_path),
            message,
        }
    }

    /// Whether the error is about the shape of the request rather than the ticket in it: a
    /// named parameter other than the messages (which carry the ticket), or a parameter the
    /// API does not know.
    pub fn names_request_parameter(&self) -> bool {
        let unknown_parameter = matches!(
            self.code.as_deref(),
            Some("unknown_parameter" | "unsupported_parameter" | "unsupported_value")
        ) || self.message.contains("extra inputs are not permitted")
            || self.message.contains("unrecognized request argument");
        let named = self.param.as_deref().is_some_and(|param| {
            let root = param.split(['.', '[']).next().unwrap_or_default();
            !root.is_empty() && root != "messages"
        });
        unknown_parameter || named
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
    /// The request's shape is refused (see [`ErrorInfo::names_request_parameter`]).
    pub request_shape: bool,
}

/// Maps a non-success status to a failure; `Retry-After` is kept whenever it was sent
/// (429s and 503s in practice).
pub(super) fn status_error(
    status: StatusCode,
    headers: &HeaderMap,
    signals: &ErrorSignals,
) -> ProviderError {
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
        400..=499 if signals.request_shape => FailureKind::RequestRejected,
        400..=499 => FailureKind::InvalidRequest,
        // 5xx, Anthropic's 529, and anything unexpected (a 3xx from a misconfigured URL):
        // transient, and a run of them trips the outage breaker.
        _ => FailureKind::ServerError,
    };
    let detail = match signals.label.as_deref().filter(|l| is_identifier(l)) {
        Some(label) => format!("HTTP {code} {label}"),
        None => format!("HTTP {code}"),
    };
    // A 429 without `Retry-After` is honoured until the provider's rate-limit reset headers
    // say the budget refills.
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
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
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
    use serde_json::json;

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
        let shape = ErrorSignals {
            request_shape: true,
            ..ErrorSignals::default()
        };
        assert_eq!(kind(400, &shape), FailureKind::RequestRejected);
        assert_eq!(kind(422, &shape), FailureKind::RequestRejected);
        assert_eq!(kind(404, &shape), FailureKind::ModelNotFound);
        let both = ErrorSignals {
            context_length: true,
            request_shape: true,
            ..ErrorSignals::default()
        };
        assert_eq!(
            kind(400, &both),
            FailureKind::ContextLength,
            "the ticket's fault first"
        );
        assert_eq!(kind(400, &none), FailureKind::InvalidRequest);
        assert_eq!(kind(422, &none), FailureKind::InvalidRequest);
        for status in [408, 409, 500, 502, 503, 504, 529] {
            assert_eq!(kind(status, &none), FailureKind::ServerError, "{status}");
        }
    }

    #[test]
    fn a_rejection_naming_a_request_parameter_is_about_the_request_not_the_ticket() {
        let named =
            |body: Value| ErrorInfo::parse(body.to_string().as_bytes()).names_request_parameter();
        let openai = |param: Value, code: Value, message: &str| json!({"error": {"type": "invalid_request_error", "param": param, "code": code, "message": message}});
        // (error body, about the request's shape)
        let table = [
            (openai(json!("response_format"), Value::Null, "Invalid schema for response_format 'triage': In context=('properties', 'is_urgent'), 'minimum' is not permitted."), true),
            (openai(json!("reasoning_effort"), json!("unsupported_parameter"), "Unsupported parameter: 'reasoning_effort' is not supported with this model."), true),
            (openai(json!("model"), json!("model_not_found"), "The model does not exist"), true),
            (openai(json!("tools[0].function.parameters"), Value::Null, "Invalid schema"), true),
            (openai(Value::Null, json!("unknown_parameter"), "Unrecognized request argument supplied: foo"), true),
            (openai(json!("messages"), json!("context_length_exceeded"), "maximum context length"), false),
            (openai(json!("messages[1].content"), Value::Null, "Invalid content"), false),
            (openai(Value::Null, Value::Null, "Invalid request."), false),
            (json!({"type": "error", "error": {"type": "invalid_request_error", "message": "tools.0.custom.input_schema: JSON schema is invalid"}}), true),
            (json!({"type": "error", "error": {"type": "invalid_request_error", "message": "reasoning_effort: Extra inputs are not permitted"}}), true),
            (json!({"type": "error", "error": {"type": "invalid_request_error", "message": "messages: field required"}}), false),
            (json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 212345 tokens > 200000 maximum"}}), false),
            (json!({"type": "error", "error": {"type": "invalid_request_error", "message": "Output blocked by content filtering policy"}}), false),
        ];
        for (body, expected) in table {
            assert_eq!(named(body.clone()), expected, "{body}");
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
