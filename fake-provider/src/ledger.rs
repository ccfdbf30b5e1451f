//! The fake's ledger: each call it received ([`CallRecord`]), the API it came in on, the
//! tokens it was billed for, and waiting for calls. It keeps the last [`KEPT_CALLS`] calls in
//! full and counts all of them ([`Ledger`]), so an hour's soak does not hold every request.

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    time::Instant,
};

use hyper::HeaderMap;
use serde_json::Value;

use crate::server;

/// Output tokens reported for every answered (200) call.
pub const OUTPUT_TOKENS: i64 = 20;

/// The API a call came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    OpenAi,
    Anthropic,
}

/// One request the fake received, as its billing ledger sees it.
#[derive(Clone)]
pub struct CallRecord {
    /// The user message, i.e. `triage::providers::ticket_text(subject, message)`.
    pub ticket_text: String,
    pub api: Api,
    pub model: String,
    /// The status sent; 0 when the connection was reset or left hanging.
    pub status: u16,
    /// A 200 was sent. A delayed 200 counts even if the client stopped waiting, as a real
    /// provider bills the work it was asked for.
    pub billed: bool,
    /// When the request arrived.
    pub at: Instant,
    /// The request body as JSON (`Null` if it was not JSON). It holds the ticket. For a batch
    /// line, the line's request (OpenAI `body`, Anthropic `params`).
    pub body: Value,
    /// The batch the call was a line of; `None` for the synchronous endpoints.
    pub batch: Option<String>,
    /// The tokens it was billed for (prompt prefix included), as its answer reported them.
    pub usage: TokenUsage,
    pub(crate) headers: HeaderMap,
}

impl CallRecord {
    /// A request header, e.g. `authorization` or `x-api-key`. Holds secrets in real use:
    /// compare it, never print it.
    pub fn header(&self, name: &str) -> Option<&str> {
        server::header_value(&self.headers, name)
    }
}

/// Leaves out headers and body: they carry the API key and the whole request.
impl fmt::Debug for CallRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallRecord")
            .field("ticket_text", &self.ticket_text)
            .field("api", &self.api)
            .field("model", &self.model)
            .field("status", &self.status)
            .field("billed", &self.billed)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

/// How many calls the ledger keeps in full (body, headers): the tests that read them make a
/// few thousand at most; beyond it only the counts grow, one per billed ticket text.
pub const KEPT_CALLS: usize = 10_000;

/// The calls so far: the newest [`KEPT_CALLS`] (or what [`Ledger::keep`] says) as records,
/// and every call counted, in total and billed per ticket text.
pub(crate) struct Ledger {
    kept: VecDeque<CallRecord>,
    keep: usize,
    calls: usize,
    billed: usize,
    billed_by_content: HashMap<String, usize>,
}

impl Default for Ledger {
    fn default() -> Self {
        Self {
            kept: VecDeque::new(),
            keep: KEPT_CALLS,
            calls: 0,
            billed: 0,
            billed_by_content: HashMap::new(),
        }
    }
}

impl Ledger {
    pub(crate) fn record(&mut self, call: CallRecord) {
        self.calls += 1;
        if call.billed {
            self.billed += 1;
            *self
                .billed_by_content
                .entry(call.ticket_text.clone())
                .or_default() += 1;
        }
        self.kept.push_back(call);
        self.trim();
    }

    /// From now on keeps only the newest `n` records (the counts stay whole).
    pub(crate) fn keep(&mut self, n: usize) {
        self.keep = n;
        self.trim();
    }

    fn trim(&mut self) {
        while self.kept.len() > self.keep {
            self.kept.pop_front();
        }
    }

    pub(crate) fn kept(&self) -> impl Iterator<Item = &CallRecord> {
        self.kept.iter()
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls
    }

    pub(crate) fn billed(&self) -> usize {
        self.billed
    }

    pub(crate) fn billed_by_content(&self) -> &HashMap<String, usize> {
        &self.billed_by_content
    }
}

/// Tokens the fake reports for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUsage {
    /// All input: the prompt prefix and the ticket.
    pub input_tokens: i64,
    /// Of those, read from the prompt cache.
    pub cached_input_tokens: i64,
    /// Of those, written to the prompt cache (Anthropic).
    pub cache_write_tokens: i64,
    pub output_tokens: i64,
}

/// The ticket's tokens, plus [`OUTPUT_TOKENS`]; the prompt prefix adds [`prefix_tokens`].
/// ASCII at about four characters a token; anything else (CJK, emoji, accents) at one token
/// per byte, as a byte-level tokenizer falls back to for text it has no merges for: the most
/// tokens a text can cost.
pub fn usage_for(ticket_text: &str) -> TokenUsage {
    let ascii = ticket_text.bytes().filter(u8::is_ascii).count();
    let other = ticket_text.len() - ascii;
    TokenUsage {
        input_tokens: 1 + ascii as i64 / 4 + other as i64,
        output_tokens: OUTPUT_TOKENS,
        ..TokenUsage::default()
    }
}

/// The tokens of a prompt prefix (the instructions before the ticket).
pub fn prefix_tokens(prefix: &str) -> i64 {
    prefix.len() as i64 / 4
}

/// `wait_for_calls` gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitTimedOut {
    pub wanted: usize,
    pub seen: usize,
}

impl fmt::Display for WaitTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "saw {} of {} calls before the timeout",
            self.seen, self.wanted
        )
    }
}

impl std::error::Error for WaitTimedOut {}
