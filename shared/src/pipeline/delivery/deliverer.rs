//! One deliverer invocation: claim deliveries while there is time, send each on its own (a
//! slow endpoint holds only its own slots, bounded by the claim), and end each with one fenced
//! write chosen by [`decide`](super::decision::decide). Run by the deliverer Lambda and by
//! `triage deliver` (its deadline from `TRIAGE_INVOCATION_SECONDS`).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use deadpool_postgres::Pool;
use serde::Serialize;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{
    bus::{self, Bus, BusEntry},
    claimed::{self, ClaimedDelivery, Event, EventData, SinkKind, EVENT_TYPE},
    decision::{decide, Attempt, Decision},
    status,
    webhook::WebhookClient,
    zendesk::ZendeskWriter,
};
use crate::{
    config::{Config, DeliveryPolicy},
    db,
    domain::error::{ConfigError, Result},
    pipeline::{invocation, limits::backoff::Schedule, outbox::Fencing, pause},
    telemetry::metric,
};

/// How often an invocation with deliveries in flight looks for newly ready ones.
const POLL: Duration = Duration::from_millis(50);

/// An invocation that cannot hold one delivery (its request's timeout) claims nothing: it is
/// refused, naming the setting, never run as an empty success (as the worker's,
/// `worker::timing`).
fn check_time_left(left: Duration, policy: &DeliveryPolicy) -> Result<(), ConfigError> {
    if left <= policy.timeout + POLL {
        return Err(ConfigError::invalid(
            "TRIAGE_WEBHOOK_TIMEOUT_SECONDS",
            format!(
                "one delivery ({:?}) does not fit in the {left:?} this invocation has: raise the invocation's time (TRIAGE_INVOCATION_SECONDS, or the function's timeout) or lower TRIAGE_WEBHOOK_TIMEOUT_SECONDS",
                policy.timeout
            ),
        ));
    }
    Ok(())
}

/// What one invocation did; also the deliverer Lambda's response.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Report {
    pub claimed: u32,
    pub delivered: u32,
    pub retried: u32,
    pub endpoints_disabled: u32,
    /// Deliveries the receiver refused for good (a closed Zendesk ticket): ended, with why.
    pub rejected: u32,
    pub fenced: u32,
    /// Deliveries whose write failed (the database went away): their leases return them.
    pub abandoned: u32,
    /// An operator paused deliveries: nothing was claimed.
    pub paused: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Delivered,
    Retried,
    Disabled,
    Rejected,
    Fenced,
    Abandoned,
}

/// Cheap to clone (shared clients and configuration): each delivery runs as its own task.
#[derive(Clone)]
pub struct Deliverer {
    pool: Pool,
    config: Arc<Config>,
    webhooks: WebhookClient,
    /// The EventBridge client, when this deliverer serves `TRIAGE_EVENT_BUS`.
    bus: Option<Arc<dyn Bus>>,
    /// The write-back, when `TRIAGE_ZENDESK_URL` is set.
    zendesk: Option<Arc<ZendeskWriter>>,
    name: String,
}

impl Deliverer {
    pub fn new(pool: Pool, config: Arc<Config>) -> Result<Self> {
        let policy = &config.delivery;
        if policy.lease <= policy.timeout {
            return Err(ConfigError::invalid(
                "TRIAGE_DELIVERY_LEASE_SECONDS",
                "must be longer than TRIAGE_WEBHOOK_TIMEOUT_SECONDS".into(),
            )
            .into());
        }
        let webhooks = WebhookClient::new(policy.timeout, policy.allowed_hosts.clone())
            .map_err(|e| ConfigError::invalid("webhook client", e.to_string()))?;
        let history = config.limits.feedback_history;
        let zendesk = ZendeskWriter::new(pool.clone(), &config.zendesk, policy.timeout, history)?
            .map(Arc::new);
        Ok(Self {
            pool,
            config,
            webhooks,
            bus: None,
            zendesk,
            name: format!("deliverer-{}", uuid::Uuid::new_v4()),
        })
    }

    /// Puts results on `TRIAGE_EVENT_BUS` through `bus` (EventBridge, `aws::eventbridge`).
    pub fn with_bus(mut self, bus: Arc<dyn Bus>) -> Self {
        self.bus = Some(bus);
        self
    }

    /// Delivers until nothing is ready and nothing is in flight, or until `deadline` (less one
    /// request's timeout) stops the claiming; in-flight deliveries always finish.
    pub async fn run_invocation(
        &self,
        deadline: Instant,
        stop: &CancellationToken,
    ) -> Result<Report> {
        let policy = &self.config.delivery;
        check_time_left(deadline.saturating_duration_since(Instant::now()), policy)?;
        let mut report = Report::default();
        if pause::paused(&db::client(&self.pool).await?)
            .await?
            .deliveries
        {
            tracing::info!("deliveries paused by an operator: nothing claimed");
            report.paused = true;
            // Nothing is claimable while paused: the lag alarm stays quiet, and the pause has
            // its own metric and alarm (the sweeper's `ops.paused_lanes`).
            metric::oldest_undelivered_age(0.0);
            return Ok(report);
        }
        // Deliveries run as tasks of their own, so they progress (and give their connection
        // back) while the claim waits for one; dropping the set (a killed invocation) aborts
        // them, and their leases return them.
        let mut in_flight: JoinSet<Vec<Outcome>> = JoinSet::new();
        if let (Some(event_bus), Some(_)) = (&policy.event_bus, &self.bus) {
            bus::ensure_subscription(&db::client(&self.pool).await?, event_bus).await?;
        }
        // A failed claim stops the claiming, never the deliveries already in flight: they
        // finish and write their outcome first.
        let mut failed = None;
        loop {
            let room = policy.concurrency.max(1).saturating_sub(in_flight.len());
            let may_claim = failed.is_none()
                && !stop.is_cancelled()
                && Instant::now() + policy.timeout + POLL < deadline;
            let mut claimed_now = 0;
            if may_claim && room > 0 {
                match self.claim(room).await {
                    Ok(claimed) => {
                        claimed_now = claimed.len();
                        report.claimed += claimed_now as u32;
                        self.start(claimed, &mut in_flight);
                        if claimed_now == room {
                            continue;
                        }
                    }
                    Err(error) => failed = Some(error),
                }
            }
            if in_flight.is_empty() && (claimed_now == 0 || !may_claim) {
                break;
            }
            tokio::select! {
                Some(joined) = in_flight.join_next() => match joined {
                    Ok(outcomes) => outcomes.into_iter().for_each(|o| report.count(o)),
                    // A task that panicked wrote nothing: its lease returns the delivery.
                    Err(_) => report.count(Outcome::Abandoned),
                },
                _ = tokio::time::sleep(POLL), if may_claim => {}
                else => {}
            }
        }
        if let Some(error) = failed {
            return Err(error);
        }
        status::emit_lag(&self.pool).await;
        Ok(report)
    }

    async fn claim(&self, room: usize) -> Result<Vec<ClaimedDelivery>> {
        let policy = &self.config.delivery;
        let client = db::client(&self.pool).await?;
        claimed::claim(
            &client,
            &self.name,
            (room as i64).min(policy.batch_size.max(1)),
            policy.lease,
            policy.per_endpoint.max(1),
        )
        .await
    }

    /// Each webhook and Zendesk delivery on its own; bus deliveries in batches of up to ten per bus.
    fn start(&self, claimed: Vec<ClaimedDelivery>, in_flight: &mut JoinSet<Vec<Outcome>>) {
        let (one_by_one, mut buses): (Vec<_>, Vec<_>) = claimed
            .into_iter()
            .partition(|d| d.kind != SinkKind::EventBridge);
        for delivery in one_by_one {
            let this = self.clone();
            in_flight.spawn(async move {
                let attempt = match (delivery.kind, &this.zendesk) {
                    (SinkKind::Zendesk, Some(zendesk)) => zendesk.write(&delivery).await,
                    // Another deliverer (with Zendesk configured) serves it, as with the bus.
                    (SinkKind::Zendesk, None) => {
                        Attempt::Failed("this deliverer has no Zendesk account configured".into())
                    }
                    _ => this.send_webhook(&delivery).await,
                };
                vec![this.settle(&delivery, attempt).await]
            });
        }
        buses.sort_by(|a, b| a.target.cmp(&b.target));
        for batch in buses.chunk_by(|a, b| a.target == b.target) {
            for chunk in batch.chunks(bus::BATCH) {
                let (this, chunk) = (self.clone(), chunk.to_vec());
                in_flight.spawn(async move { this.deliver_to_bus(chunk).await });
            }
        }
    }

    async fn deliver_to_bus(&self, deliveries: Vec<ClaimedDelivery>) -> Vec<Outcome> {
        let attempts = match &self.bus {
            Some(bus) => {
                let entries: Vec<BusEntry> = deliveries
                    .iter()
                    .map(|d| BusEntry {
                        event_id: d.event_id.clone(),
                        detail: serde_json::to_string(&Detail {
                            event_id: &d.event_id,
                            data: &d.data,
                        })
                        .expect("an event serialises"),
                    })
                    .collect();
                bus.put(&deliveries[0].target, &entries).await
            }
            // Another deliverer (with the bus configured) serves it; this one leaves it be.
            None => deliveries
                .iter()
                .map(|_| Attempt::Failed("this deliverer has no EventBridge client".into()))
                .collect(),
        };
        let mut outcomes = Vec::with_capacity(deliveries.len());
        for (delivery, attempt) in deliveries.iter().zip(attempts) {
            outcomes.push(self.settle(delivery, attempt).await);
        }
        outcomes
    }

    /// Decides what becomes of a delivery after `attempt`, and writes it (fenced).
    async fn settle(&self, delivery: &ClaimedDelivery, attempt: Attempt) -> Outcome {
        let policy = &self.config.delivery;
        let schedule = Schedule {
            base: policy.backoff_base,
            max: policy.backoff_max,
            jitter_max: policy.jitter_max,
        };
        let decision = decide(
            attempt,
            delivery.attempts,
            delivery.failing_for,
            policy.retry_window,
            &schedule,
            delivery.id() as u32,
        );
        match self.write(delivery, &decision).await {
            Ok(Fencing::Lost) => Outcome::Fenced,
            Ok(Fencing::Held) => match decision {
                Decision::Delivered => Outcome::Delivered,
                Decision::Retry { .. } => Outcome::Retried,
                Decision::Disable { .. } => Outcome::Disabled,
                Decision::Abandon { .. } => Outcome::Rejected,
            },
            Err(error) => {
                tracing::warn!(delivery = delivery.id(), error = %error.report(), "delivery outcome not written; its lease will return it");
                Outcome::Abandoned
            }
        }
    }

    async fn send_webhook(&self, delivery: &ClaimedDelivery) -> Attempt {
        let body = serde_json::to_vec(&Event {
            kind: EVENT_TYPE,
            timestamp: delivery.announced_at,
            data: &delivery.data,
        })
        .expect("an event serialises");
        let secrets: Vec<&str> = delivery.secrets.iter().map(String::as_str).collect();
        self.webhooks
            .send(
                &delivery.target,
                &delivery.event_id,
                chrono::Utc::now().timestamp(),
                body,
                &secrets,
            )
            .await
    }

    async fn write(&self, delivery: &ClaimedDelivery, decision: &Decision) -> Result<Fencing> {
        let client = db::client(&self.pool).await?;
        match decision {
            Decision::Delivered => {
                metric::delivery("delivered");
                delivery.delivered(&client).await
            }
            Decision::Retry { after, error } => {
                metric::delivery("retry");
                delivery.retry(&client, *after, error).await
            }
            Decision::Disable { reason, shown } => {
                metric::delivery("refused");
                metric::endpoint_disabled();
                tracing::warn!(subscription = %delivery.subscription_id, %reason, "endpoint disabled");
                delivery.disable_endpoint(&client, reason, shown).await
            }
            Decision::Abandon { reason } => {
                metric::delivery("abandoned");
                tracing::warn!(delivery = delivery.id(), %reason, "delivery abandoned");
                delivery.abandon(&client, reason).await
            }
        }
    }
}

/// An EventBridge entry's `Detail`: the event's data, with the event id to dedupe on.
#[derive(Serialize)]
struct Detail<'a> {
    event_id: &'a str,
    #[serde(flatten)]
    data: &'a EventData,
}

impl Report {
    fn count(&mut self, outcome: Outcome) {
        let field = match outcome {
            Outcome::Delivered => &mut self.delivered,
            Outcome::Retried => &mut self.retried,
            Outcome::Disabled => &mut self.endpoints_disabled,
            Outcome::Rejected => &mut self.rejected,
            Outcome::Fenced => &mut self.fenced,
            Outcome::Abandoned => &mut self.abandoned,
        };
        *field += 1;
    }
}

/// `triage deliver` without `--once`: invocations back to back until stopped, as the worker's.
pub async fn run_until_stopped(
    deliverer: &Deliverer,
    idle: Duration,
    stop: CancellationToken,
) -> Result<()> {
    let stop = &stop;
    invocation::back_to_back(
        deliverer.config.worker.invocation_budget,
        idle,
        stop,
        |deadline| async move { Ok(deliverer.run_invocation(deadline, stop).await?.claimed > 0) },
    )
    .await
}
