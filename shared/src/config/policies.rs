//! The policies the configuration is made of, each with the article's defaults: the API's
//! limits, the worker's times and bounds, the rate limit, the fleet, retention, the quality
//! gate and delivery.

use std::{str::FromStr, time::Duration};

use crate::providers::Tier;

/// Input limits of the HTTP API.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_subject_chars: usize,
    pub max_message_chars: usize,
    /// How long an `Idempotency-Key` request header is remembered.
    pub idempotency_key_ttl: Duration,
    /// `TRIAGE_CALLER_DAILY_TICKETS`: tickets one principal may create per UTC day; `None`, no
    /// quota.
    pub caller_daily_tickets: Option<u32>,
    /// `TRIAGE_DESK_DAILY_TICKETS`: a help desk's tickets evaluated per UTC day; past it they
    /// are taken and their jobs wait for the next day with room (docs/caller-limits.md); `None`,
    /// no quota.
    pub desk_daily_tickets: Option<u32>,
    /// `TRIAGE_CALLER_RPM`: requests one principal may make per minute, every route counted
    /// (`http::rate`); `None`, no limit.
    pub caller_rpm: Option<u32>,
    /// `TRIAGE_DEDUP_HOLD_SECONDS`: a ticket whose content another principal sent first is
    /// shown pending for a random 0.5 to 1.5 times this long, like a fresh evaluation
    /// (docs/dedup.md); zero, shown at once.
    pub dedup_hold: Duration,
    /// Labels kept per ticket in its feedback history; older ones are removed.
    pub feedback_history: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 64 * 1024,
            max_subject_chars: 500,
            max_message_chars: 20_000,
            idempotency_key_ttl: Duration::from_secs(24 * 3600),
            caller_daily_tickets: None,
            desk_daily_tickets: None,
            caller_rpm: None,
            dedup_hold: DEFAULT_DEDUP_HOLD,
            feedback_history: 20,
        }
    }
}

/// Who may label, and how training from the database is bounded (docs/labelling.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Labelling {
    /// `TRIAGE_LABELLERS`: principals whose feedback trains and judges (an IAM caller's ARN,
    /// an assumed role without its session; a JWT's `ISSUER SUBJECT`). JWT callers with
    /// `triage/label`, the Zendesk connector and operators may label whatever it says.
    pub labellers: Vec<String>,
    /// `TRIAGE_TRAIN_OWNER_SHARE`: the most of a database source's training examples one
    /// ticket owner may give, once several owners give some (`pipeline::cascade::examples`).
    pub owner_share: f64,
    /// `TRIAGE_TRAIN_GIVER_SHARE`: the most of a training set's weight, and of a by-time
    /// window's desk truth, one label giver's labels may carry (`pipeline::cascade::caps`).
    pub giver_share: f64,
}

/// `TRIAGE_TRAIN_GIVER_SHARE`'s default: no desk tool or connector, labelling whichever
/// owner's tickets, carries more than a fifth of a training set or of a gate's desk truth.
pub const DEFAULT_TRAIN_GIVER_SHARE: f64 = 0.2;

/// `TRIAGE_TRAIN_OWNER_SHARE`'s default: no caller gives more than a fifth of a training set
/// once five or more give to it (with fewer, no more than an equal share).
pub const DEFAULT_TRAIN_OWNER_SHARE: f64 = 0.2;

impl Default for Labelling {
    fn default() -> Self {
        Self {
            labellers: Vec::new(),
            owner_share: DEFAULT_TRAIN_OWNER_SHARE,
            giver_share: DEFAULT_TRAIN_GIVER_SHARE,
        }
    }
}

/// The cascade's audit (docs/cascade.md, "The audit"): the share of would-be-local answers
/// the large model answers too, and the window live precision is measured over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AuditPolicy {
    /// `TRIAGE_AUDIT_SHARE` (0 turns the audit off).
    pub share: f64,
    /// `TRIAGE_AUDIT_WINDOW_DAYS`.
    pub window_days: u32,
}

impl Default for AuditPolicy {
    fn default() -> Self {
        Self {
            share: 0.03,
            window_days: 7,
        }
    }
}

/// `TRIAGE_DEDUP_HOLD_SECONDS`'s default: about what a fresh interactive evaluation takes
/// (the doorbell, a claim, one provider call).
pub const DEFAULT_DEDUP_HOLD: Duration = Duration::from_secs(8);

/// `TRIAGE_BULK_SHARE`'s default: bulk work takes at most half of a claim while interactive
/// work waits.
pub const DEFAULT_BULK_SHARE: f64 = 0.5;

/// Retry, lease and pacing policy of the worker (SPEC rule 7 and "Beyond the article").
#[derive(Debug, Clone)]
pub struct WorkerPolicy {
    pub batch_size: i64,
    pub concurrency: usize,
    pub lease: Duration,
    pub max_attempts: i32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub jitter_max: Duration,
    pub call_timeout: Duration,
    pub breaker_cooldown: Duration,
    pub invocation_budget: Duration,
    /// `TRIAGE_DAILY_BUDGET_USD`: spend per UTC day, after which workers stop claiming
    /// (`pipeline::limits::budget`); `None`, no budget.
    pub daily_budget_usd: Option<f64>,
    /// `TRIAGE_BULK_SHARE`: the share of a claim (and so of the shared rate limit) bulk work
    /// may take while interactive work waits (`pipeline::outbox::lanes`).
    pub bulk_share: f64,
    /// `TRIAGE_BULK_TIER`: how bulk-lane calls are served.
    pub bulk_tier: Tier,
    /// `TRIAGE_FLEX_TIMEOUT_SECONDS`: one flex call (OpenAI advises 15 minutes), bounded by the
    /// invocation's deadline, which the lease outlasts.
    pub flex_timeout: Duration,
    /// The most lines one provider batch carries (`TRIAGE_BATCH_MAX_LINES`).
    pub batch_max_lines: i64,
    /// `TRIAGE_PROVISIONAL_AFTER_SECONDS`: with a cascade configured, how long a new ticket may
    /// wait for the large model (behind the rate limit, say) before its local answer is
    /// given as provisional (`pipeline::provisional`). An open breaker or a spent budget
    /// does not wait for it.
    pub provisional_after: Duration,
}

impl Default for WorkerPolicy {
    fn default() -> Self {
        Self {
            batch_size: 10,
            concurrency: 4,
            // Short, and renewed by the invocation while it holds a job
            // (`pipeline::outbox::renewal`): a crashed invocation's jobs are back within it.
            lease: Duration::from_secs(10),
            max_attempts: 5,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            jitter_max: Duration::from_secs(30),
            call_timeout: Duration::from_secs(30),
            breaker_cooldown: Duration::from_secs(30),
            invocation_budget: Duration::from_secs(60),
            daily_budget_usd: None,
            bulk_share: DEFAULT_BULK_SHARE,
            bulk_tier: Tier::Online,
            flex_timeout: Duration::from_secs(900),
            batch_max_lines: 1000,
            provisional_after: Duration::from_secs(60),
        }
    }
}

/// The provider's limits shared by every worker (`pipeline::limits::rate_limit`); `None` = no limit.
/// Limits the provider announces in its headers lower these, never raise them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimitPolicy {
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
}

/// The fleets on AWS (docs/scaling.md): each tick of the scaler starts up to `max_workers`
/// bounded worker invocations by ringing the doorbell queue, and up to `max_deliverers`
/// deliverer invocations by ringing the deliverers' one (docs/delivery.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetConfig {
    pub max_workers: u32,
    /// `TRIAGE_WORKER_QUEUE_URL`: the SQS queue whose messages each start one worker invocation.
    pub doorbell_queue_url: Option<String>,
    pub max_deliverers: u32,
    /// `TRIAGE_DELIVERER_QUEUE_URL`: the same for deliverer invocations; unset, the deliverer
    /// runs on its schedule only.
    pub deliverer_queue_url: Option<String>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            max_workers: 100,
            doorbell_queue_url: None,
            max_deliverers: 10,
            deliverer_queue_url: None,
        }
    }
}

/// How long finished jobs stay in the outbox (results stay forever), and how the sweeper
/// deletes them: in batches, so one sweep never holds a long transaction.
#[derive(Debug, Clone)]
pub struct RetentionPolicy {
    pub keep_done: Duration,
    /// `TRIAGE_TICKET_RETENTION_SECONDS`: tickets older than this are erased by the sweeper
    /// (`pipeline::erase`); `None`, kept.
    pub keep_tickets: Option<Duration>,
    pub batch_size: i64,
    pub max_batches_per_sweep: u32,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self {
            keep_done: Duration::from_secs(7 * 24 * 3600),
            keep_tickets: None,
            batch_size: 1000,
            max_batches_per_sweep: 20,
        }
    }
}

/// The promote gate (docs/quality.md): which labelled set a version must have been evaluated
/// on, and how much worse than the current version it may be.
#[derive(Debug, Clone, PartialEq)]
pub struct QualityGate {
    /// `TRIAGE_EVAL_SET`: a set's path, or `sha256:HEX` (its digest, where the file is not at
    /// hand, as in Lambda); `None`, the set shipped in `evals/`.
    pub set: Option<String>,
    pub tolerance: Tolerance,
}

/// `TRIAGE_EVAL_TOLERANCE`, `macro_f1=0.01,urgent_recall=0.02` (the defaults): how far below
/// the current version's figures a candidate's may be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub macro_f1: f64,
    pub urgent_recall: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Self {
            macro_f1: 0.01,
            urgent_recall: 0.02,
        }
    }
}

/// Delivery of results to subscribers (docs/delivery.md): bounds per endpoint, the retry
/// schedule and window, and the SSRF allow-list.
#[derive(Debug, Clone)]
pub struct DeliveryPolicy {
    /// Deliveries claimed at once, and in flight at once per deliverer.
    pub batch_size: i64,
    pub concurrency: usize,
    /// In flight at once per endpoint (`TRIAGE_DELIVERY_PER_ENDPOINT`): bounds the rate an
    /// endpoint sees, and what a slow one can hold of the deliverer.
    pub per_endpoint: i64,
    /// Webhook subscriptions one caller may have (`TRIAGE_SUBSCRIPTIONS_PER_CALLER`).
    pub subscriptions_per_caller: i64,
    pub lease: Duration,
    /// One webhook request, connection included.
    pub timeout: Duration,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub jitter_max: Duration,
    /// How long an endpoint may fail before it is disabled (Standard Webhooks: days).
    pub retry_window: Duration,
    /// `TRIAGE_WEBHOOK_ALLOWED_HOSTS`: hosts allowed although private or loopback.
    pub allowed_hosts: Vec<String>,
    /// `TRIAGE_EVENT_BUS`: the EventBridge bus (name or ARN) that receives every result.
    pub event_bus: Option<String>,
}

impl Default for DeliveryPolicy {
    fn default() -> Self {
        Self {
            batch_size: 100,
            concurrency: 32,
            per_endpoint: 4,
            subscriptions_per_caller: 10,
            // A claimed delivery starts at once and ends within its timeout: twice that is
            // room for its write, and how long a dead deliverer's rows hold their endpoints.
            lease: Duration::from_secs(20),
            timeout: Duration::from_secs(10),
            backoff_base: Duration::from_secs(5),
            backoff_max: Duration::from_secs(3600),
            jitter_max: Duration::from_secs(30),
            retry_window: Duration::from_secs(3 * 24 * 3600),
            allowed_hosts: Vec::new(),
            event_bus: None,
        }
    }
}

impl FromStr for Tolerance {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut tolerance = Tolerance::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| {
                format!("{part:?}: expected name=value (macro_f1=0.01,urgent_recall=0.02)")
            })?;
            let value = value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && (0.0..=1.0).contains(v))
                .ok_or_else(|| format!("{part:?}: the value must be a number in [0, 1]"))?;
            match name.trim() {
                "macro_f1" => tolerance.macro_f1 = value,
                "urgent_recall" => tolerance.urgent_recall = value,
                other => {
                    return Err(format!(
                        "{other:?} is not a gated figure (macro_f1, urgent_recall)"
                    ))
                }
            }
        }
        Ok(tolerance)
    }
}
