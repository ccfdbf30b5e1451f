//! The batch tier: many evaluations sent as one provider batch, answered within 24 hours at
//! the batch price (OpenAI's Batch API, Anthropic's Message Batches). Provider-layer only:
//! submitting, polling, cancelling, listing and reading results; which jobs go into a batch,
//! and what each result does to its job, is the pipeline's.
//!
//! The provider keeps the lines' text (OpenAI in the input file and the answers in the output
//! and error files, Anthropic in the batch) until [`BatchClient::delete`] removes it, which
//! the pipeline does once a batch is collected (docs/cost.md, "Batch tier").
//!
//! Every request is one HTTP request (no hidden retries). A submission carries the caller's
//! `reference`, which the provider echoes back (OpenAI: the batch's `metadata` and the input
//! file's name; Anthropic: the `custom_id`s, which the caller builds from it), so a batch sent
//! by a worker that died before recording it can be found again instead of sent twice.

pub(in crate::providers) mod api;

use reqwest::Method;
use serde_json::Value;

use self::api::{delete, BatchApi};
use super::{
    anthropic::batch::AnthropicBatches,
    http_common::{id_segment, unexpected_body, Body, Connection},
    openai::batch::OpenAiBatches,
    ProviderConfig, ProviderError, ProviderKind,
};
pub use api::{Batch, BatchLine, BatchRequest, BatchState, LineOutcome, REFERENCE_KEY};

/// Whose batch API a [`BatchClient`] calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchProvider {
    OpenAi,
    Anthropic,
}

/// The configured provider's batch API (none for the offline `rules` classifier).
pub struct BatchClient {
    provider: BatchProvider,
    connection: Connection,
}

impl BatchClient {
    pub fn from_config(
        config: &ProviderConfig,
        call_timeout: std::time::Duration,
    ) -> Result<Option<Self>, ProviderError> {
        let (provider, wire) = match config.kind {
            ProviderKind::Rules => return Ok(None),
            ProviderKind::OpenAi => (BatchProvider::OpenAi, &super::openai::OPENAI),
            ProviderKind::Anthropic => (BatchProvider::Anthropic, &super::anthropic::ANTHROPIC),
        };
        Ok(Some(Self {
            provider,
            connection: Connection::new(wire, config, call_timeout)?,
        }))
    }

    /// The provider's name, as its online calls' ledger rows record it too.
    pub fn provider_name(&self) -> &'static str {
        self.connection.provider_name()
    }

    /// Sends `requests` as one batch named by `reference` (an identifier of at most 40
    /// characters: it becomes part of a file name and of each custom id).
    pub async fn submit(
        &self,
        reference: &str,
        requests: &[BatchRequest<'_>],
    ) -> Result<Batch, ProviderError> {
        let connection = &self.connection;
        match self.provider {
            BatchProvider::OpenAi => OpenAiBatches::submit(connection, reference, requests).await,
            BatchProvider::Anthropic => {
                AnthropicBatches::submit(connection, reference, requests).await
            }
        }
    }

    pub async fn retrieve(&self, id: &str) -> Result<Batch, ProviderError> {
        let path = format!("{}/{}", self.path(), id_segment(id)?);
        self.batch(Method::GET, &path).await
    }

    /// Asks the provider to stop the batch: lines not yet run end as [`LineOutcome::NotRun`].
    pub async fn cancel(&self, id: &str) -> Result<Batch, ProviderError> {
        let path = format!("{}/{}/cancel", self.path(), id_segment(id)?);
        self.batch(Method::POST, &path).await
    }

    /// One page of the account's batches, newest first, after batch `after` when given.
    pub async fn list(&self, after: Option<&str>, limit: u32) -> Result<Vec<Batch>, ProviderError> {
        let after_parameter = match self.provider {
            BatchProvider::OpenAi => OpenAiBatches::AFTER,
            BatchProvider::Anthropic => AnthropicBatches::AFTER,
        };
        let cursor = match after {
            None => String::new(),
            Some(id) => format!("&{after_parameter}={}", id_segment(id)?),
        };
        let path = format!("{}?limit={}{cursor}", self.path(), limit.clamp(1, 100));
        let page = self.json(Method::GET, &path).await?;
        page["data"]
            .as_array()
            .ok_or_else(|| unexpected_body("a list of batches"))?
            .iter()
            .map(|batch| self.parse(batch))
            .collect()
    }

    /// Every line's outcome, once the batch has ended. Lines the provider reports nothing for
    /// (a batch that failed as a whole) are absent: the caller treats them as not run.
    pub async fn results(&self, batch: &Batch) -> Result<Vec<BatchLine>, ProviderError> {
        match self.provider {
            BatchProvider::OpenAi => OpenAiBatches::results(&self.connection, batch).await,
            BatchProvider::Anthropic => AnthropicBatches::results(&self.connection, batch).await,
        }
    }

    /// Deletes what the provider keeps of an ended batch's text: OpenAI's input, output and
    /// error files (the batch object itself holds none, and cannot be deleted), Anthropic's
    /// batch with its requests and results. What is gone already counts as deleted, so a
    /// deletion cut short is simply done again.
    pub async fn delete(&self, batch: &Batch) -> Result<(), ProviderError> {
        let paths = match self.provider {
            BatchProvider::OpenAi => OpenAiBatches::text_paths(batch)?,
            BatchProvider::Anthropic => AnthropicBatches::text_paths(batch)?,
        };
        for path in paths {
            delete(&self.connection, &path).await?;
        }
        Ok(())
    }

    fn path(&self) -> &'static str {
        match self.provider {
            BatchProvider::OpenAi => OpenAiBatches::PATH,
            BatchProvider::Anthropic => AnthropicBatches::PATH,
        }
    }

    async fn json(&self, method: Method, path: &str) -> Result<Value, ProviderError> {
        let timeout = self.connection.call_timeout();
        let exchange = self
            .connection
            .send(method, path, Body::Empty, timeout)
            .await?;
        serde_json::from_slice(&exchange.body).map_err(|_| unexpected_body("JSON"))
    }

    async fn batch(&self, method: Method, path: &str) -> Result<Batch, ProviderError> {
        let batch = self.json(method, path).await?;
        self.parse(&batch)
    }

    fn parse(&self, batch: &Value) -> Result<Batch, ProviderError> {
        match self.provider {
            BatchProvider::OpenAi => OpenAiBatches::parse(batch),
            BatchProvider::Anthropic => AnthropicBatches::parse(batch),
        }
    }
}
