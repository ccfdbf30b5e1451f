//! What the HTTP adapters share: the client, the one request, the output schema, and the
//! mapping from transport failures to [`FailureKind`] (error answers: [`super::http_errors`]).
//!
//! Nothing here puts ticket text or the API key into a [`ProviderError`].

use std::time::{Duration, Instant, SystemTime};

use reqwest::{
    header::{HeaderMap, CONTENT_TYPE},
    Client, Method, RequestBuilder, StatusCode, Url,
};
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use super::{
    http_errors::{status_error, ErrorInfo, ErrorSignals},
    rate_headers, EvaluationRequest, FailureKind, ModelOutput, Provider, ProviderConfig,
    ProviderError, ProviderReply, Usage,
};
use crate::secret::{Credential, ExposeSecret};

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

/// One provider's HTTP API: the client (built on the first request, then reused by every
/// request of the container: loading the system trust store takes tens of milliseconds we keep
/// off the Lambda init path), the checked base URL and the key. Every request it sends is one
/// request: no retries, no redirects.
pub struct Connection {
    wire: &'static WireFormat,
    client: OnceCell<Client>,
    call_timeout: Duration,
    base: Url,
    api_key: Credential,
}

/// What a request carries.
pub enum Body {
    Empty,
    Json(Value),
    /// A body built by hand (the multipart upload of a batch file), with its content type.
    Raw {
        content_type: String,
        bytes: Vec<u8>,
    },
}

impl Connection {
    pub fn new(
        wire: &'static WireFormat,
        config: &ProviderConfig,
        call_timeout: Duration,
    ) -> Result<Self, ProviderError> {
        Ok(Self {
            wire,
            client: OnceCell::new(),
            call_timeout,
            base: endpoint(&config.url, "")?,
            api_key: config.api_key.clone(),
        })
    }

    /// The provider's name, as its calls' ledger rows record it.
    pub fn provider_name(&self) -> &'static str {
        self.wire.name
    }

    /// The timeout of one request that is not a model call (a batch's management).
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Sends one request to `{base}/{path}` and reads the whole answer within `timeout`. An
    /// answer that is not a success is the [`ProviderError`] its status and body say.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Body,
        timeout: Duration,
    ) -> Result<Exchange, ProviderError> {
        let client = self
            .client
            .get_or_try_init(|| async { build_client(self.call_timeout) })
            .await?;
        let started = Instant::now();
        let url = self.base.join(path).map_err(|_| {
            ProviderError::new(
                FailureKind::InvalidRequest,
                "request path is not a URL path",
            )
        })?;
        let (key_generation, key) = self.api_key.current();
        let request = (self.wire.authorize)(client.request(method, url), key.expose_secret());
        let request = match body {
            Body::Empty => request,
            Body::Json(value) => request.json(&value),
            Body::Raw {
                content_type,
                bytes,
            } => request.header(CONTENT_TYPE, content_type).body(bytes),
        };
        let exchange = send(request, timeout).await?;
        if !exchange.status.is_success() {
            let signals = (self.wire.error_signals)(&ErrorInfo::parse(&exchange.body));
            let error = status_error(exchange.status, &exchange.headers, &signals);
            if error.kind == FailureKind::Unauthorized {
                // A rotated key: the next request (the breaker's probe) uses the new one.
                // Bounded by what is left of this request's time, so deadlines still hold.
                let left = timeout.saturating_sub(started.elapsed());
                let _ = tokio::time::timeout(left, self.api_key.refused(key_generation)).await;
            }
            return Err(error);
        }
        Ok(exchange)
    }
}

/// A provider reached over HTTP with JSON bodies.
pub struct HttpProvider {
    connection: Connection,
}

impl HttpProvider {
    pub fn new(
        wire: &'static WireFormat,
        config: &ProviderConfig,
        call_timeout: Duration,
    ) -> Result<Self, ProviderError> {
        Ok(Self {
            connection: Connection::new(wire, config, call_timeout)?,
        })
    }
}

impl Provider for HttpProvider {
    fn name(&self) -> &'static str {
        self.connection.provider_name()
    }

    async fn evaluate(
        &self,
        request: EvaluationRequest<'_>,
    ) -> Result<ProviderReply, ProviderError> {
        let wire = self.connection.wire;
        let body = Body::Json((wire.request_body)(&request));
        let exchange = self
            .connection
            .send(Method::POST, wire.path, body, request.timeout)
            .await?;
        let (output, usage) = (wire.parse_reply)(&exchange.body);
        Ok(ProviderReply {
            output,
            usage,
            http_status: exchange.status.as_u16(),
            rate: rate_headers::read(&exchange.headers, SystemTime::now()),
            confidence: None,
        })
    }
}

/// A provider's id (a batch's, a file's) as one path segment: ids are short identifiers, and
/// anything else is refused rather than joined into a URL that carries the key.
pub fn id_segment(id: &str) -> Result<&str, ProviderError> {
    let plain = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    plain.then_some(id).ok_or_else(|| {
        ProviderError::new(
            FailureKind::ServerError,
            "the provider sent an id that is not an identifier",
        )
    })
}

/// A 200 whose body is not what the API documents: the provider is misbehaving, so it is
/// treated like a server error (transient).
pub fn unexpected_body(what: &str) -> ProviderError {
    ProviderError::new(
        FailureKind::ServerError,
        format!("the provider's answer is not {what}"),
    )
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

/// `{base}/{path}`, checked at start-up so a bad URL never reaches a call, and never to a
/// plain http address off loopback (`tls::refuse_in_clear`).
/// With an empty `path`, the base with a trailing `/`, which other paths are joined to.
fn endpoint(base: &str, path: &str) -> Result<Url, ProviderError> {
    let refuse = |why: &str| {
        ProviderError::new(
            FailureKind::ConnectFailed,
            format!("TRIAGE_PROVIDER_URL {why}"),
        )
    };
    let url = Url::parse(&format!("{}/{path}", base.trim_end_matches('/')))
        .map_err(|_| refuse("is not a valid URL"))?;
    crate::tls::refuse_in_clear(&url).map_err(refuse)?;
    Ok(url)
}

/// The answer schema both providers are forced into; the department enum is the policy's.
/// Kept inside the strictest subset both accept (every field required, no other field, no
/// numeric or length constraints, which strict structured outputs reject on some models):
/// the contract checks the ranges.
pub(super) fn output_schema(departments: &[String]) -> Value {
    let score = json!({"type": "number"});
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
pub struct Exchange {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_url_must_be_https_unless_it_is_loopback() {
        for allowed in [
            "https://api.openai.com/v1",
            "http://127.0.0.1:8080/v1",
            "http://[::1]:8080",
            "http://localhost:9000",
        ] {
            assert!(endpoint(allowed, "chat/completions").is_ok(), "{allowed}");
        }
        for refused in [
            "http://api.openai.com/v1",
            "http://10.0.0.5/v1",
            "ftp://127.0.0.1/v1",
            "not a url",
        ] {
            let err = endpoint(refused, "chat/completions").unwrap_err();
            assert!(
                err.detail.contains("TRIAGE_PROVIDER_URL"),
                "{refused}: {err}"
            );
        }
    }

    #[test]
    fn the_budgets_framing_bound_holds_the_answer_schema_and_the_role_markers() {
        let policy = crate::providers::prompt::Policy::load("policy-v1").unwrap();
        let schema = output_schema(&policy.departments).to_string();
        // A generous 64 tokens for the role markers of two messages.
        assert!(
            schema.len() + 64 <= crate::providers::FRAMING_TOKENS,
            "{} bytes of schema",
            schema.len()
        );
    }

    #[test]
    fn the_output_schema_stays_inside_the_strict_subset() {
        let schema = output_schema(&["billing".into(), "general".into()]);
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["required"].as_array().unwrap().len(), 3);
        for property in schema["properties"].as_object().unwrap().values() {
            for keyword in property.as_object().unwrap().keys() {
                assert!(["type", "enum"].contains(&keyword.as_str()), "{keyword}");
            }
        }
    }
}
