//! A scriptable stand-in for the OpenAI and Anthropic APIs, served over real HTTP on
//! loopback, with a ledger of the calls it answered (and would have billed): the newest
//! [`KEPT_CALLS`] in full, every one counted.
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
mod behavior;
pub mod classifier;
mod departments;
mod gate;
mod ledger;
mod limit;
mod render;
mod script;
mod server;
mod strict;
pub mod zendesk;

pub use batch::BatchSummary;
pub use behavior::{Behavior, Flex, LimitHeaders};
pub use departments::{classify, classify_in, DEPARTMENTS};
pub use gate::Gate;
pub use ledger::{
    prefix_tokens, usage_for, Api, CallRecord, TokenUsage, WaitTimedOut, KEPT_CALLS, OUTPUT_TOKENS,
};

use std::{
    collections::{HashMap, HashSet},
    net::SocketAddr,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use tokio::{
    net::TcpListener,
    sync::{oneshot, Notify},
    task::JoinHandle,
};

use script::Script;

/// State shared by the handle and the server's connections.
#[derive(Default)]
struct Shared {
    script: Mutex<Script>,
    limit: Mutex<Option<limit::Bucket>>,
    ledger: Mutex<ledger::Ledger>,
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

    fn ledger(&self) -> MutexGuard<'_, ledger::Ledger> {
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
        self.ledger().record(call);
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

    /// The calls kept in full ([`KEPT_CALLS`], or [`FakeProvider::keep_calls`]): every call
    /// so far up to that many, else the newest, in arrival order. Counts are in
    /// [`FakeProvider::call_count`] and [`FakeProvider::billed_by_content`].
    pub fn calls(&self) -> Vec<CallRecord> {
        self.shared.ledger().kept().cloned().collect()
    }

    /// The billed ones of [`FakeProvider::calls`].
    pub fn billed_calls(&self) -> Vec<CallRecord> {
        self.shared
            .ledger()
            .kept()
            .filter(|c| c.billed)
            .cloned()
            .collect()
    }

    /// Every call so far, kept in full or not.
    pub fn call_count(&self) -> usize {
        self.shared.ledger().calls()
    }

    /// Every billed call so far, kept in full or not.
    pub fn billed_count(&self) -> usize {
        self.shared.ledger().billed()
    }

    /// Billed calls per ticket text, all of them: more than 1 means the same content was paid
    /// twice.
    pub fn billed_by_content(&self) -> HashMap<String, usize> {
        self.shared.ledger().billed_by_content().clone()
    }

    /// From now on keeps only the newest `n` calls in full (the counts stay whole).
    pub fn keep_calls(&self, n: usize) {
        self.shared.ledger().keep(n);
    }

    /// Waits until at least `n` calls have arrived ([`FakeProvider::call_count`]), and returns
    /// those kept.
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
                if self.call_count() >= n {
                    return self.calls();
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, arrived)
            .await
            .map_err(|_| WaitTimedOut {
                wanted: n,
                seen: self.call_count(),
            })
    }

    /// Stops the server; when this returns, the port is closed and no connection is open.
    pub async fn shutdown(self) {
        drop(self.stop);
        // A panic in the server task would already have failed the calls it served.
        let _ = self.server.await;
    }
}
