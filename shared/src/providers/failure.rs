//! What a failure means for the outbox: the one table (mirrored in `docs/errors.md`).
//!
//! | kind | class | outbox |
//! |---|---|---|
//! | Timeout, ServerError, ConnectionReset | transient (provider-wide when consecutive across items) | back to the queue with backoff |
//! | RateLimited (429) | rate limit | every worker holds off until `Retry-After`; item back without spending an attempt |
//! | InvalidRequest (400), ContextLength, ContentPolicy, ContractViolation, OutputTruncated | permanent | dead letter at once |
//! | Unauthorized (401/403), ModelNotFound, RequestRejected (4xx naming a request parameter), ConnectFailed (refused/DNS), QuotaExhausted (spend-limit 429) | provider-wide | pause claiming, item back without spending an attempt |

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Timeout,
    ServerError,
    ConnectionReset,
    RateLimited,
    InvalidRequest,
    ContextLength,
    ContentPolicy,
    ContractViolation,
    /// A contract violation of its own: the answer hit the output-token cap
    /// ([`super::MAX_OUTPUT_TOKENS`]) before it was complete.
    OutputTruncated,
    Unauthorized,
    ModelNotFound,
    /// The provider refuses the shape of our request (a parameter, the output schema, the
    /// model), not the ticket: every call would fail alike until the deployment changes.
    RequestRejected,
    ConnectFailed,
    QuotaExhausted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// This item, this time: retry with backoff.
    Transient,
    /// This item, always: dead letter now.
    Permanent,
    /// Every item would fail: pause claiming, spend no attempt.
    ProviderWide,
    /// The provider is up but over its limit: every worker holds off, no attempt is spent.
    RateLimit,
}

impl ErrorClass {
    /// The class as stored in the attempt ledger.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Permanent => "permanent",
            ErrorClass::ProviderWide => "provider_wide",
            ErrorClass::RateLimit => "rate_limit",
        }
    }
}

impl FailureKind {
    pub fn class(self) -> ErrorClass {
        use FailureKind::*;
        match self {
            Timeout | ServerError | ConnectionReset => ErrorClass::Transient,
            RateLimited => ErrorClass::RateLimit,
            InvalidRequest | ContextLength | ContentPolicy | ContractViolation
            | OutputTruncated => ErrorClass::Permanent,
            Unauthorized | ModelNotFound | RequestRejected | ConnectFailed | QuotaExhausted => {
                ErrorClass::ProviderWide
            }
        }
    }

    /// Transient kinds that, repeated across consecutive items, mean the provider is down.
    pub fn counts_toward_outage(self) -> bool {
        matches!(
            self,
            FailureKind::Timeout | FailureKind::ServerError | FailureKind::ConnectionReset
        )
    }

    /// The stable reason stored in `error_class` and used as the metric dimension.
    pub fn reason(self) -> &'static str {
        use FailureKind::*;
        match self {
            Timeout => "timeout",
            ServerError => "server_error",
            ConnectionReset => "connection_reset",
            RateLimited => "rate_limited",
            InvalidRequest => "invalid_request",
            ContextLength => "context_length",
            ContentPolicy => "content_policy",
            ContractViolation => "contract_violation",
            OutputTruncated => "output_truncated",
            Unauthorized => "unauthorized",
            ModelNotFound => "model_not_found",
            RequestRejected => "request_rejected",
            ConnectFailed => "connect_failed",
            QuotaExhausted => "quota_exhausted",
        }
    }
}
