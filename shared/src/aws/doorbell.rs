//! The fleets on AWS (docs/scaling.md): each scheduled tick of the scaler sizes the worker
//! fleet ([`fleet::invocations_to_start`]) and rings its doorbell queue that many times; the
//! worker's SQS event source mapping, capped by `MaximumConcurrency`, turns each message into
//! one bounded worker invocation. Deliverers, when their queue is configured, the same way
//! ([`fleet::deliverers_to_start`], docs/delivery.md). The outboxes carry the work: a lost
//! doorbell costs one invocation's throughput, never a ticket or an event.

use aws_sdk_sqs::{error::DisplayErrorContext, types::SendMessageBatchRequestEntry, Client};
use deadpool_postgres::Pool;
use serde::Serialize;

use super::sdk;
use crate::{
    config::Config,
    db,
    domain::error::{ConfigError, Error, Result},
    pipeline::{
        delivery::claimed::{self, Backlog},
        limits::fleet::{self, Observed},
    },
};

/// SQS takes at most ten messages per batch.
const BATCH: u32 = 10;

/// One queue whose messages each start one invocation.
#[derive(Debug, Clone)]
pub struct Doorbell {
    client: Client,
    queue_url: String,
}

/// The scaler's doorbells: the workers', and the deliverers' when `TRIAGE_DELIVERER_QUEUE_URL`
/// is set. One SQS client, reached like every AWS client here (`AWS_ENDPOINT_URL_SQS` or
/// `AWS_ENDPOINT_URL` redirect it).
#[derive(Debug, Clone)]
pub struct Doorbells {
    workers: Doorbell,
    deliverers: Option<Doorbell>,
}

impl Doorbells {
    pub fn from_lookup(
        config: &Config,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let queue_url = config.fleet.doorbell_queue_url.clone().ok_or_else(|| {
            ConfigError::invalid(
                "TRIAGE_WORKER_QUEUE_URL",
                "is not set (the scaler rings it)".into(),
            )
        })?;
        let client = Client::new(&sdk::settings(get, "SQS", "to start workers")?);
        let doorbell = |queue_url| Doorbell {
            client: client.clone(),
            queue_url,
        };
        Ok(Self {
            deliverers: config.fleet.deliverer_queue_url.clone().map(doorbell),
            workers: doorbell(queue_url),
        })
    }
}

impl Doorbell {
    /// Sends `n` messages, ten per request.
    async fn ring(&self, n: u32) -> Result<()> {
        let mut left = n;
        while left > 0 {
            let entries = (0..left.min(BATCH))
                .map(|i| {
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(r#"{"doorbell":true}"#)
                        .build()
                        .expect("id and body are set")
                })
                .collect();
            let sent = self
                .client
                .send_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| Error::unavailable("SQS", DisplayErrorContext(&e).to_string()))?;
            if !sent.failed.is_empty() {
                let reasons: Vec<_> = sent.failed.iter().map(|f| f.code.as_str()).collect();
                return Err(Error::unavailable(
                    "SQS",
                    format!("messages refused: {reasons:?}"),
                ));
            }
            left -= left.min(BATCH);
        }
        Ok(())
    }
}

/// What one tick saw and did; the scaler Lambda's response.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Tick {
    pub observed: Observed,
    pub started: u32,
    /// The deliverers', when their doorbell is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliverers: Option<DeliverersTick>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeliverersTick {
    pub observed: Backlog,
    pub started: u32,
}

/// One scheduled tick: observe, size, ring; workers, then deliverers.
pub async fn tick(pool: &Pool, config: &Config, doorbells: &Doorbells) -> Result<Tick> {
    let client = db::client(pool).await?;
    let observed = fleet::observe(&client).await?;
    let started = fleet::invocations_to_start(
        &observed,
        &config.fleet,
        &config.worker,
        &config.rate_limit,
        config.worker.invocation_budget,
    );
    doorbells.workers.ring(started).await?;
    if started > 0 {
        tracing::info!(?observed, started, "worker invocations started");
    }
    let deliverers = match &doorbells.deliverers {
        None => None,
        Some(doorbell) => {
            let observed = claimed::backlog(&client, config.delivery.per_endpoint).await?;
            let started = fleet::deliverers_to_start(
                observed.claimable,
                observed.running,
                &config.fleet,
                &config.delivery,
            );
            doorbell.ring(started).await?;
            if started > 0 {
                tracing::info!(?observed, started, "deliverer invocations started");
            }
            Some(DeliverersTick { observed, started })
        }
    };
    Ok(Tick {
        observed,
        started,
        deliverers,
    })
}
