//! Evaluating one ticket: the versioned prompt and policy, the providers behind one trait,
//! the output contract, and the one table that says what each failure means for the outbox.
//! Owns prompts, providers (and their settings and prices), the contract and the failure
//! classes; uses tls, secret and the domain. Never the database: the pipeline records calls.

pub mod anthropic;
pub mod batch;
pub mod classifier;
pub mod contract;
pub mod failure;
mod http_common;
mod http_errors;
pub mod openai;
pub mod prices;
pub mod prompt;
mod provider;
pub mod rate_headers;
pub mod rules;

use std::{future::Future, time::Duration};

pub use batch::{Batch, BatchClient, BatchLine, BatchRequest, BatchState, LineOutcome};
pub use contract::{AnsweredBy, ContractViolation, Evaluation};
pub use failure::{ErrorClass, FailureKind};
pub use prices::{PriceTable, Tier};
pub use prompt::{Framing, Policy, Prompt};
pub use provider::{ProviderConfig, ProviderKind};
pub use rate_headers::RateSignals;

use crate::domain::versions::ModelVersion;

/// The cap on every answer's tokens (OpenAI `max_completion_tokens`, Anthropic `max_tokens`):
/// the answer is three short fields, so this only bounds a runaway (or steered) reply, and its
/// bill. An answer cut at it is [`FailureKind::OutputTruncated`].
pub const MAX_OUTPUT_TOKENS: u32 = 1024;

/// Everything a provider needs for one call.
#[derive(Debug, Clone, Copy)]
pub struct EvaluationRequest<'a> {
    pub subject: &'a str,
    pub message: &'a str,
    pub prompt: &'a Prompt,
    pub model: &'a ModelVersion,
    pub policy: &'a Policy,
    /// The whole call, connect included.
    pub timeout: Duration,
    /// [`Tier::Flex`] asks OpenAI for its flex tier; a batch line is sent as [`Tier::Online`]
    /// (the batch itself is the tier).
    pub tier: Tier,
}

impl EvaluationRequest<'_> {
    /// The tokens this call is expected to use, for the shared rate limit (taken with the
    /// call, then corrected by the usage reported): about four characters a token for the
    /// prompt and the ticket, plus the output cap.
    pub fn estimated_tokens(&self) -> i64 {
        let chars = self.prompt.text.len() + self.subject.len() + self.message.len();
        (chars / 4) as i64 + i64::from(MAX_OUTPUT_TOKENS)
    }

    /// The most this call can use, which the daily budget reserves before it is made: one
    /// input token per byte of what is sent (the providers' tokenizers are byte-level, so no
    /// token is shorter than a byte, whatever the script: CJK, emoji and random text cost up
    /// to a token a byte where English costs a quarter), the chat's framing and answer schema
    /// ([`FRAMING_TOKENS`]), and the output cap. The reported usage corrects it.
    pub fn worst_case_usage(&self) -> Usage {
        let sent =
            self.prompt.text.len() + self.prompt.user_message(self.subject, self.message).len();
        Usage {
            input_tokens: (sent + FRAMING_TOKENS) as i64,
            output_tokens: i64::from(MAX_OUTPUT_TOKENS),
            ..Usage::default()
        }
    }
}

/// What a call's input holds besides the prompt and the ticket, at most: the role markers of
/// its two messages and the answer's JSON schema (about 400 bytes), as tokens.
pub const FRAMING_TOKENS: usize = 1024;

/// The tokens a call was billed for, in each provider's terms brought to one meaning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Every input token, cached or not (OpenAI `prompt_tokens`; Anthropic `input_tokens`
    /// plus its cache reads and writes), so rate limits count what the provider counts.
    pub input_tokens: i64,
    /// Of those, read from the provider's prompt cache (OpenAI
    /// `prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`).
    pub cached_input_tokens: i64,
    /// Of those, written into the cache (Anthropic `cache_creation_input_tokens`).
    pub cache_write_tokens: i64,
    pub output_tokens: i64,
}

impl Usage {
    /// Input tokens at the plain input price.
    pub fn uncached_input_tokens(&self) -> i64 {
        (self.input_tokens - self.cached_input_tokens - self.cache_write_tokens).max(0)
    }
}

/// What the model said, before the contract is checked.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelOutput {
    Json(serde_json::Value),
    /// The model declined (OpenAI `refusal`, Anthropic `stop_reason: refusal`).
    Refusal,
    /// The provider's content filter cut the answer.
    ContentFiltered,
    /// The answer hit the token limit before it was complete.
    Truncated,
    /// Text that is not a JSON object. Only its length is kept: it may quote the ticket.
    NotJson {
        len: usize,
    },
}

/// A call the provider answered and billed.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderReply {
    pub output: ModelOutput,
    pub usage: Usage,
    pub http_status: u16,
    /// What the provider said about its rate limit alongside the answer.
    pub rate: RateSignals,
    /// How sure the provider is of the whole answer (department and urgency both right), as a
    /// calibrated probability: the local classifier's, which a cascade compares with its
    /// threshold. `None` for a large model, which says nothing of it.
    pub confidence: Option<f64>,
}

/// A call that failed. `kind` decides the class (see [`failure`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind:?}{}: {detail}", http_status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
pub struct ProviderError {
    pub kind: FailureKind,
    pub http_status: Option<u16>,
    /// `Retry-After`, when the provider sent one; for a 429 without it, the provider's
    /// rate-limit reset.
    pub retry_after: Option<Duration>,
    /// Short, ticket-free description for `last_error` and logs.
    pub detail: String,
}

impl ProviderError {
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            http_status: None,
            retry_after: None,
            detail: detail.into(),
        }
    }
}

/// One model call. Implementations make exactly one HTTP request per call (no hidden
/// retries: every billed call must be one recorded attempt) and never log ticket text.
pub trait Provider: Send + Sync {
    /// Short name used for the circuit breaker and the attempt ledger.
    fn name(&self) -> &'static str;
    fn evaluate(
        &self,
        request: EvaluationRequest<'_>,
    ) -> impl Future<Output = Result<ProviderReply, ProviderError>> + Send;
}

/// The configured provider, chosen at start-up.
pub enum AnyProvider {
    Rules(rules::RulesProvider),
    /// `openai` and `anthropic`: the same HTTP provider over their wire formats.
    Http(http_common::HttpProvider),
}

impl AnyProvider {
    /// Builds the provider once per process (Lambda container); its HTTP client is built on
    /// the first call and reused after.
    pub fn from_config(
        config: &ProviderConfig,
        call_timeout: Duration,
    ) -> Result<Self, ProviderError> {
        let wire = match config.kind {
            ProviderKind::Rules => return Ok(Self::Rules(rules::RulesProvider)),
            ProviderKind::OpenAi => &openai::OPENAI,
            ProviderKind::Anthropic => &anthropic::ANTHROPIC,
        };
        Ok(Self::Http(http_common::HttpProvider::new(
            wire,
            config,
            call_timeout,
        )?))
    }
}

impl Provider for AnyProvider {
    fn name(&self) -> &'static str {
        match self {
            Self::Rules(p) => p.name(),
            Self::Http(p) => p.name(),
        }
    }

    async fn evaluate(
        &self,
        request: EvaluationRequest<'_>,
    ) -> Result<ProviderReply, ProviderError> {
        match self {
            Self::Rules(p) => p.evaluate(request).await,
            Self::Http(p) => p.evaluate(request).await,
        }
    }
}

/// The ticket as the model sees it under a plain prompt (user message; see
/// [`Prompt::user_message`]). Fake providers key their ledger on it.
pub fn ticket_text(subject: &str, message: &str) -> String {
    format!("Subject: {}\n\n{}", subject.trim(), message.trim())
}
