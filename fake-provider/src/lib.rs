//! A scriptable stand-in for the OpenAI and Anthropic APIs, served over real HTTP on
//! loopback, with a ledger of every call it answered (and would have billed).
//!
//! ```no_run
//! # async fn demo() {
//! use fake_provider::{Behavior, FakeProvider};
//! let fake = FakeProvider::start().await;
//! fake.push(Behavior::RateLimited { retry_after: None });
//! // point TRIAGE_PROVIDER_URL at fake.url() ...
//! # }
//! ```
//!
//! Which behaviour answers a call: a 401 when a key is required and the call carries another,
//! else (in strict mode) a 400 for what the real API would refuse in the request's shape,
//! else a 429 when the request limit (if set, [`FakeProvider::limit_requests`]) is spent,
//! else, for a flex call while flex is scripted ([`FakeProvider::set_flex`]), every n-th
//! one's "resource unavailable" 429, else the outage (while set), else the next pushed
//! behaviour, else the first `when_contains` rule whose needle is in the ticket text, else
//! the default (a flex call's answer waits the flex delay on top).
//!
//! Prompt caching: a prompt prefix seen before (OpenAI: the messages before the ticket, per
//! model and `prompt_cache_key`; Anthropic: the system blocks up to `cache_control`) is
//! reported as cached input; Anthropic reports its first sight as a cache write.
//!
//! Batches ([`batch`]): OpenAI's `/v1/files` and `/v1/batches`, Anthropic's
//! `/v1/messages/batches`. Each line gets its behaviour from the script when the batch is
//! created; the batch ends [`FakeProvider::set_batch_delay`] after creation (or when
//! cancelled). A line whose behaviour never answers (`Hang`, `ResetConnection`) expires.

mod batch;
pub mod classifier;
mod gate;
mod limit;
mod render;
mod server;
mod strict;

pub use batch::BatchSummary;
pub use gate::Gate;

use std::{
    collections::{HashMap, HashSet, VecDeque},
    fmt,
    net::SocketAddr,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use hyper::HeaderMap;
use serde_json::{json, Value};
use tokio::{
    net::TcpListener,
    sync::{oneshot, Notify},
    task::JoinHandle,
};

/// The departments of `policy-v1`, which [`classify`] chooses from.
pub const DEPARTMENTS: [&str; 5] = ["billing", "technical", "account", "sales", "general"];

/// Output tokens reported for every answered (200) call.
pub const OUTPUT_TOKENS: i64 = 20;

/// Whether a request limit announces itself in headers, or only refuses with `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHeaders {
    Sent,
    Withheld,
}

/// How the fake answers one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Behavior {
    /// A valid answer derived from the ticket text, see [`classify`].
    #[default]
    Classify,
    /// This exact object as the model's output.
    Answer(Value),
    /// Waits, then behaves like the inner behaviour.
    Delay(Duration, Box<Behavior>),
    /// Waits at the gate until the test releases it (see [`Gate`]), then behaves like the
    /// inner behaviour. Batch lines are not held.
    Held(Gate, Box<Behavior>),
    /// 429 with a `Retry-After` header when given.
    RateLimited { retry_after: Option<Duration> },
    /// OpenAI flex's 429 "resource unavailable": no capacity at the flex tier right now.
    ResourceUnavailable,
    /// The account is out of money: OpenAI's 429 `insufficient_quota`, Anthropic's 402
    /// `billing_error`.
    QuotaExhausted,
    /// This status (500 when it is not a valid one) with the provider's server-error body.
    Status(u16),
    /// OpenAI's 503 / Anthropic's 529 "overloaded", with a `Retry-After` header when given.
    Overloaded { retry_after: Option<Duration> },
    /// 401.
    Unauthorized,
    /// 404, unknown model.
    ModelNotFound,
    /// 400, the prompt exceeds the context window.
    ContextLength,
    /// 400, the request was rejected by the provider's safety system.
    ContentPolicy,
    /// 400, anything else wrong with the request.
    InvalidRequest,
    /// 400 naming a request parameter (`response_format`, `reasoning_effort`, `tools`...), as
    /// the APIs refuse a shape they do not support; `message` is the API's text.
    RejectParameter { param: String, message: String },
    /// Drops the TCP connection with a RST, without sending a response.
    ResetConnection,
    /// Never answers; the connection stays open until the client gives up.
    Hang,
    /// 200 with a body that is not valid JSON.
    MalformedJson,
    /// 200, the model's answer is prose instead of JSON.
    NotJsonContent,
    /// 200, the model declined (OpenAI `refusal`, Anthropic `stop_reason: refusal`).
    Refusal,
    /// 200, OpenAI `finish_reason: content_filter`. Anthropic has no separate filter
    /// signal, so it answers like [`Behavior::Refusal`].
    ContentFilter,
    /// 200, the answer was cut at the token limit (`length` / `max_tokens`).
    Truncated,
    /// 200 with a well-formed answer outside the contract (department `"legal"`).
    OutOfContract,
}

impl Behavior {
    /// `self`, answered after `delay`.
    pub fn after(self, delay: Duration) -> Behavior {
        Behavior::Delay(delay, Box::new(self))
    }

    /// `self`, answered when `gate` is released (see [`Gate`]).
    pub fn held(self, gate: &Gate) -> Behavior {
        Behavior::Held(gate.clone(), Box::new(self))
    }

    /// The total delay and the behaviour it leads to (its gates passed over).
    fn split_delay(self) -> (Duration, Behavior) {
        let (delay, _, behavior) = self.split();
        (delay, behavior)
    }

    /// The total delay, the gates to pass, and the behaviour they lead to.
    fn split(self) -> (Duration, Vec<Gate>, Behavior) {
        match self {
            Behavior::Delay(delay, inner) => {
                let (more, gates, inner) = inner.split();
                (delay + more, gates, inner)
            }
            Behavior::Held(gate, inner) => {
                let (delay, mut gates, inner) = inner.split();
                gates.insert(0, gate);
                (delay, gates, inner)
            }
            other => (Duration::ZERO, Vec::new(), other),
        }
    }
}

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
    headers: HeaderMap,
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

/// How the flex tier behaves ([`FakeProvider::set_flex`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flex {
    /// Added to every flex call's answer.
    pub delay: Duration,
    /// Every n-th flex call gets a 429 "resource unavailable"; 0, never.
    pub unavailable_every: u32,
}

/// The answer of [`Behavior::Classify`]: a department from [`DEPARTMENTS`] and scores in
/// [0, 1], all derived from a hash of the ticket text, so equal tickets get equal answers.
pub fn classify(ticket_text: &str) -> Value {
    // FNV-1a: stable across runs and Rust versions, unlike std's hasher.
    let hash = ticket_text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let urgency_score = (hash >> 8) % 101;
    json!({
        "is_urgent": if urgency_score >= 50 { 0.9 } else { 0.1 },
        "department": DEPARTMENTS[(hash % DEPARTMENTS.len() as u64) as usize],
        "urgency_score": urgency_score as f64 / 100.0,
    })
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

#[derive(Default)]
struct Script {
    /// The only API key accepted, when set.
    accepted_key: Option<String>,
    /// Refuse what the real APIs refuse in a request's shape (see `strict`).
    strict: bool,
    outage: Option<Behavior>,
    queue: VecDeque<Behavior>,
    rules: Vec<(String, Behavior)>,
    default: Behavior,
    flex: Option<Flex>,
    flex_calls: u32,
    /// How long a batch runs before it ends.
    batch_delay: Duration,
    /// Deleting a file or a batch fails (500) while set.
    deletes_fail: bool,
    /// Classifier mode: `Classify` answers from these labels (see [`classifier`]).
    labels: Option<classifier::Classifier>,
}

impl Script {
    /// A flex call's turn: every n-th is unavailable, the others answer after the flex delay.
    fn next_flex(&mut self, ticket_text: &str, model: &str) -> Behavior {
        let Some(flex) = self.flex else {
            return self.behavior(ticket_text, model);
        };
        self.flex_calls += 1;
        if flex.unavailable_every > 0 && self.flex_calls.is_multiple_of(flex.unavailable_every) {
            return Behavior::ResourceUnavailable;
        }
        self.behavior(ticket_text, model).after(flex.delay)
    }

    /// The behaviour for a call, with `Classify` answered from the labels in classifier mode.
    fn behavior(&mut self, ticket_text: &str, model: &str) -> Behavior {
        let behavior = self.next(ticket_text);
        match &self.labels {
            Some(labels) => labelled(behavior, labels, ticket_text, model),
            None => behavior,
        }
    }

    fn next(&mut self, ticket_text: &str) -> Behavior {
        if let Some(outage) = &self.outage {
            return outage.clone();
        }
        if let Some(next) = self.queue.pop_front() {
            return next;
        }
        self.rules
            .iter()
            .find(|(needle, _)| ticket_text.contains(needle.as_str()))
            .map_or_else(|| self.default.clone(), |(_, b)| b.clone())
    }
}

/// `Classify` (delayed or not) as the label file answers it; a ticket it does not label keeps
/// the hash answer.
fn labelled(
    behavior: Behavior,
    labels: &classifier::Classifier,
    ticket_text: &str,
    model: &str,
) -> Behavior {
    match behavior {
        Behavior::Classify => labels
            .answer(ticket_text, model)
            .map_or(Behavior::Classify, Behavior::Answer),
        Behavior::Delay(delay, inner) => Behavior::Delay(
            delay,
            Box::new(labelled(*inner, labels, ticket_text, model)),
        ),
        Behavior::Held(gate, inner) => {
            Behavior::Held(gate, Box::new(labelled(*inner, labels, ticket_text, model)))
        }
        other => other,
    }
}

/// State shared by the handle and the server's connections.
#[derive(Default)]
struct Shared {
    script: Mutex<Script>,
    limit: Mutex<Option<limit::Bucket>>,
    ledger: Mutex<Vec<CallRecord>>,
    recorded: Notify,
    /// Prompt prefixes seen so far (cached from then on).
    cache: Mutex<HashSet<String>>,
    batches: Mutex<batch::Batches>,
}

impl Shared {
    fn script(&self) -> MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn limit(&self) -> MutexGuard<'_, Option<limit::Bucket>> {
        self.limit.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ledger(&self) -> MutexGuard<'_, Vec<CallRecord>> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn batches(&self) -> MutexGuard<'_, batch::Batches> {
        self.batches.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key` (a prompt prefix and what scopes it) was seen before; it is from now on.
    fn cached(&self, key: String) -> bool {
        !self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key)
    }

    /// What `call` is billed: the ticket, the prefix, and what of it the cache held.
    fn usage(&self, call: &render::Call) -> TokenUsage {
        let mut usage = usage_for(&call.ticket_text);
        let prefix = &call.prefix;
        usage.input_tokens += prefix.cacheable + prefix.plain;
        if let Some(key) = prefix.cache_key.clone().filter(|_| prefix.cacheable > 0) {
            if self.cached(key) {
                usage.cached_input_tokens = prefix.cacheable;
            } else if call.api == Api::Anthropic {
                usage.cache_write_tokens = prefix.cacheable;
            }
        }
        usage
    }

    fn record(&self, call: CallRecord) {
        self.ledger().push(call);
        self.recorded.notify_waiters();
    }
}

/// The running fake. Dropping it (or [`FakeProvider::shutdown`]) stops the server and
/// drops every open connection.
pub struct FakeProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<()>,
}

impl FakeProvider {
    /// Serves on a free loopback port.
    pub async fn start() -> Self {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind a loopback port")
    }

    /// Serves on `addr` (port 0 picks a free one).
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let (stop, stopped) = oneshot::channel();
        let server = tokio::spawn(server::serve(listener, shared.clone(), stopped));
        Ok(Self {
            addr,
            shared,
            stop,
            server,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, as `TRIAGE_PROVIDER_URL` expects it: `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Answers the next call with `behavior` (FIFO; only an outage goes first).
    pub fn push(&self, behavior: Behavior) {
        self.shared.script().queue.push_back(behavior);
    }

    /// Answers every call whose ticket text contains `needle` with `behavior`. The first
    /// matching rule wins.
    pub fn when_contains(&self, needle: &str, behavior: Behavior) {
        self.shared
            .script()
            .rules
            .push((needle.to_owned(), behavior));
    }

    /// What calls get when nothing else applies ([`Behavior::Classify`] at start).
    pub fn set_default(&self, behavior: Behavior) {
        self.shared.script().default = behavior;
    }

    /// Classifier mode: from now on `Classify` answers from `labels` (a ticket they do not
    /// label keeps the hash answer).
    pub fn classify_from_labels(&self, labels: classifier::Classifier) {
        self.shared.script().labels = Some(labels);
    }

    /// While `Some`, every call gets this behaviour, and the queue is left untouched.
    pub fn set_outage(&self, behavior: Option<Behavior>) {
        self.shared.script().outage = behavior;
    }

    /// From now on, calls with `service_tier: "flex"` behave as `flex` says.
    pub fn set_flex(&self, flex: Flex) {
        self.shared.script().flex = Some(flex);
    }

    /// From now on, batches end this long after they are created (at once by default).
    pub fn set_batch_delay(&self, delay: Duration) {
        self.shared.script().batch_delay = delay;
    }

    /// From now on deleting a file or a batch fails with a 500, or works again.
    pub fn set_deletes_fail(&self, fail: bool) {
        self.shared.script().deletes_fail = fail;
    }

    /// Every batch created so far, oldest first.
    pub fn batches(&self) -> Vec<BatchSummary> {
        self.shared.batches().summaries()
    }

    /// The ids of the files and batches that still hold `text`: what erasing it at the
    /// provider has left to delete.
    pub fn holding(&self, text: &str) -> Vec<String> {
        self.shared.batches().holding(text)
    }

    /// From now on only calls with this API key (bearer token for OpenAI, `x-api-key` for
    /// Anthropic) are answered; any other gets 401, as after a key rotation.
    pub fn accept_only_key(&self, key: &str) {
        self.shared.script().accepted_key = Some(key.to_owned());
    }

    /// From now on, refuse requests as the real APIs do when their shape is unsupported:
    /// unknown top-level parameters, and output schemas outside the strict subset (every
    /// property required, `additionalProperties: false`, no numeric or length constraints).
    pub fn set_strict(&self, strict: bool) {
        self.shared.script().strict = strict;
    }

    /// From now on at most `per_minute` requests a minute are answered, about one second's
    /// share at once (a token bucket); the others get a 429 with `Retry-After`. With
    /// [`LimitHeaders::Sent`], OpenAI calls carry `x-ratelimit-{limit,remaining,reset}-requests`.
    pub fn limit_requests(&self, per_minute: u32, headers: LimitHeaders) {
        let bucket = limit::Bucket::new(per_minute, headers, Instant::now());
        *self.shared.limit() = Some(bucket);
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.shared.ledger().clone()
    }

    pub fn billed_calls(&self) -> Vec<CallRecord> {
        self.shared
            .ledger()
            .iter()
            .filter(|c| c.billed)
            .cloned()
            .collect()
    }

    /// Billed calls per ticket text: more than 1 means the same content was paid twice.
    pub fn billed_by_content(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for call in self.shared.ledger().iter().filter(|c| c.billed) {
            *counts.entry(call.ticket_text.clone()).or_default() += 1;
        }
        counts
    }

    /// Waits until at least `n` calls have arrived, and returns them all.
    pub async fn wait_for_calls(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<CallRecord>, WaitTimedOut> {
        let arrived = async {
            loop {
                // Registered before the check, so a call recorded in between still wakes us.
                let notified = self.shared.recorded.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let calls = self.calls();
                if calls.len() >= n {
                    return calls;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, arrived)
            .await
            .map_err(|_| WaitTimedOut {
                wanted: n,
                seen: self.shared.ledger().len(),
            })
    }

    /// Stops the server; when this returns, the port is closed and no connection is open.
    pub async fn shutdown(self) {
        drop(self.stop);
        // A panic in the server task would already have failed the calls it served.
        let _ = self.server.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_is_deterministic_and_inside_the_contract() {
        for text in ["", "Subject: a\n\nb", "Subject: refund\n\nplease", "ü"] {
            let answer = classify(text);
            assert_eq!(answer, classify(text));
            let department = answer["department"].as_str().unwrap();
            assert!(DEPARTMENTS.contains(&department));
            for score in ["is_urgent", "urgency_score"] {
                let v = answer[score].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&v), "{score} = {v}");
            }
        }
    }

    #[test]
    fn nested_delays_add_up_to_the_inner_behavior() {
        let behavior = Behavior::Refusal
            .after(Duration::from_millis(5))
            .after(Duration::from_millis(7));
        assert_eq!(
            behavior.split_delay(),
            (Duration::from_millis(12), Behavior::Refusal)
        );
    }

    #[test]
    fn the_script_prefers_outage_then_queue_then_rules_then_default() {
        let mut script = Script::default();
        script
            .rules
            .push(("refund".into(), Behavior::QuotaExhausted));
        script.queue.push_back(Behavior::Hang);
        script.outage = Some(Behavior::Status(503));
        assert_eq!(script.next("refund"), Behavior::Status(503));
        script.outage = None;
        assert_eq!(script.next("refund"), Behavior::Hang);
        assert_eq!(script.next("refund"), Behavior::QuotaExhausted);
        assert_eq!(script.next("other"), Behavior::Classify);
    }
}
