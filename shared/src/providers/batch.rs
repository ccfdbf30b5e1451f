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

use reqwest::Method;
use serde_json::Value;

use super::{
    anthropic,
    http_common::{id_segment, unexpected_body, Body, Connection},
    openai, EvaluationRequest, ProviderConfig, ProviderError, ProviderKind, ProviderReply,
};

/// The metadata key (OpenAI) under which a batch names the submission that sent it.
pub const REFERENCE_KEY: &str = "triage_submission";

/// One line of a batch: the evaluation and the id its result comes back under.
#[derive(Debug, Clone, Copy)]
pub struct BatchRequest<'a> {
    /// `[A-Za-z0-9_-]{1,64}`, unique within the batch (Anthropic's rule, the stricter one).
    pub custom_id: &'a str,
    pub request: EvaluationRequest<'a>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchState {
    /// Validating, in progress, finalizing, or being cancelled.
    Running,
    /// Completed, expired, cancelled or failed: its results are final.
    Ended,
}

/// A batch as the provider describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub id: String,
    /// The submission's reference as the provider echoes it in the batch itself (OpenAI's
    /// metadata); `None` where only the results carry it (Anthropic's `custom_id`s).
    pub reference: Option<String>,
    pub state: BatchState,
    /// Lines per outcome so far, for logs: (succeeded, failed or not run).
    pub counts: (i64, i64),
    /// Where the results are read from: OpenAI's output and error files.
    pub(super) files: Vec<String>,
    /// OpenAI's input file: the lines as sent.
    pub(super) input_file: Option<String>,
}

/// What became of one line.
#[derive(Debug, Clone, PartialEq)]
pub enum LineOutcome {
    /// Answered and billed (at the batch price), like a 200 of the online endpoint.
    Answered(ProviderReply),
    /// The provider refused or failed this line as it would an online call.
    Failed(ProviderError),
    /// Never run: the batch expired or was cancelled first. Nothing was billed.
    NotRun,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BatchLine {
    pub custom_id: String,
    pub outcome: LineOutcome,
}

/// The configured provider's batch API (none for the offline `rules` classifier).
pub struct BatchClient {
    kind: ProviderKind,
    connection: Connection,
}

impl BatchClient {
    pub fn from_config(
        config: &ProviderConfig,
        call_timeout: std::time::Duration,
    ) -> Result<Option<Self>, ProviderError> {
        let wire = match config.kind {
            ProviderKind::Rules => return Ok(None),
            ProviderKind::OpenAi => &openai::OPENAI,
            ProviderKind::Anthropic => &anthropic::ANTHROPIC,
        };
        Ok(Some(Self {
            kind: config.kind,
            connection: Connection::new(wire, config, call_timeout)?,
        }))
    }

    /// Sends `requests` as one batch named by `reference` (an identifier of at most 40
    /// characters: it becomes part of a file name and of each custom id).
    pub async fn submit(
        &self,
        reference: &str,
        requests: &[BatchRequest<'_>],
    ) -> Result<Batch, ProviderError> {
        match self.kind {
            ProviderKind::Anthropic => anthropic::batch::submit(&self.connection, requests).await,
            _ => openai::batch::submit(&self.connection, reference, requests).await,
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
        let cursor = match (after, self.kind) {
            (None, _) => String::new(),
            (Some(id), ProviderKind::Anthropic) => {
                format!("&after_id={}", id_segment(id)?)
            }
            (Some(id), _) => format!("&after={}", id_segment(id)?),
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
        match self.kind {
            ProviderKind::Anthropic => anthropic::batch::results(&self.connection, batch).await,
            _ => openai::batch::results(&self.connection, batch).await,
        }
    }

    /// Deletes what the provider keeps of an ended batch's text: OpenAI's input, output and
    /// error files (the batch object itself holds none, and cannot be deleted), Anthropic's
    /// batch with its requests and results. What is gone already counts as deleted, so a
    /// deletion cut short is simply done again.
    pub async fn delete(&self, batch: &Batch) -> Result<(), ProviderError> {
        let paths: Vec<String> = match self.kind {
            ProviderKind::Anthropic => vec![format!("{}/{}", self.path(), id_segment(&batch.id)?)],
            _ => batch
                .input_file
                .iter()
                .chain(&batch.files)
                .map(|file| Ok(format!("files/{}", id_segment(file)?)))
                .collect::<Result<_, ProviderError>>()?,
        };
        for path in paths {
            delete(&self.connection, &path).await?;
        }
        Ok(())
    }

    fn path(&self) -> &'static str {
        match self.kind {
            ProviderKind::Anthropic => anthropic::batch::PATH,
            _ => openai::batch::PATH,
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
        match self.kind {
            ProviderKind::Anthropic => anthropic::batch::parse(batch),
            _ => openai::batch::parse(batch),
        }
    }
}

/// One `DELETE`; a 404 means it is gone already.
pub(super) async fn delete(connection: &Connection, path: &str) -> Result<(), ProviderError> {
    let timeout = connection.call_timeout();
    match connection
        .send(Method::DELETE, path, Body::Empty, timeout)
        .await
    {
        Err(error) if error.http_status != Some(404) => Err(error),
        _ => Ok(()),
    }
}

/// One JSON object per line; a line that is not one is skipped (its job stays in the batch's
/// care and falls back to online when the batch is closed).
pub(super) fn json_lines(body: &[u8]) -> impl Iterator<Item = Value> + '_ {
    body.split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(Value::is_object)
}
