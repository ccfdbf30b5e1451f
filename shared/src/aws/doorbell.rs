//! The worker fleet on AWS (docs/scaling.md): each scheduled tick of the scaler sizes the fleet
//! ([`fleet::invocations_to_start`]) and rings the doorbell queue that many times; the worker's
//! SQS event source mapping, capped by `MaximumConcurrency`, turns each message into one
//! bounded worker invocation. The outbox carries the work: a lost doorbell costs one
//! invocation's throughput, never a ticket.

use aws_sdk_sqs::{error::DisplayErrorContext, types::SendMessageBatchRequestEntry, Client};
use deadpool_postgres::Pool;
use serde::Serialize;

use super::sdk;
use crate::{
    config::Config,
    db,
    domain::error::{ConfigError, Error, Result},
    pipeline::fleet::{self, Observed},
};

/// SQS takes at most ten messages per batch.
const BATCH: u32 = 10;

#[derive(Debug, Clone)]
pub struct Doorbell {
    client: Client,
    queue_url: String,
}

impl Doorbell {
    /// The queue named by `TRIAGE_WORKER_QUEUE_URL`, reached like every AWS client here
    /// (`AWS_ENDPOINT_URL_SQS` or `AWS_ENDPOINT_URL` redirect it).
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
        let settings = sdk::settings(get, "SQS", "to start workers")?;
        Ok(Self {
            client: Client::new(&settings),
            queue_url,
        })
    }

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
}

/// One scheduled tick: observe, size, ring.
pub async fn tick(pool: &Pool, config: &Config, doorbell: &Doorbell) -> Result<Tick> {
    let observed = fleet::observe(&db::client(pool).await?).await?;
    let started = fleet::invocations_to_start(
        &observed,
        &config.fleet,
        &config.worker,
        &config.rate_limit,
        config.worker.invocation_budget,
    );
    doorbell.ring(started).await?;
    if started > 0 {
        tracing::info!(?observed, started, "worker invocations started");
    }
    Ok(Tick { observed, started })
}
