//! What every provider's batch API shares: the lines sent, the batch as the provider
//! describes it, each line's outcome, and the [`BatchApi`] each provider implements
//! (`openai::batch`, `anthropic::batch`). A leaf: the providers' modules take their types
//! from here and [`super::BatchClient`] chooses among them.

use std::future::Future;

use reqwest::Method;
use serde_json::Value;

use crate::providers::{
    http_common::{Body, Connection},
    EvaluationRequest, ProviderError, ProviderReply,
};

/// One provider's batch API, as [`super::BatchClient`] calls it.
pub(in crate::providers) trait BatchApi {
    /// Batches, under the API's base URL.
    const PATH: &'static str;
    /// The list's query parameter for "after this batch".
    const AFTER: &'static str;

    /// Sends `requests` as one batch named by `reference`.
    fn submit(
        connection: &Connection,
        reference: &str,
        requests: &[BatchRequest<'_>],
    ) -> impl Future<Output = Result<Batch, ProviderError>> + Send;

    /// The batch a response of the API describes.
    fn parse(batch: &Value) -> Result<Batch, ProviderError>;

    /// Every line's outcome, once the batch has ended.
    fn results(
        connection: &Connection,
        batch: &Batch,
    ) -> impl Future<Output = Result<Vec<BatchLine>, ProviderError>> + Send;

    /// The paths whose `DELETE` removes what the provider keeps of the batch's text.
    fn text_paths(batch: &Batch) -> Result<Vec<String>, ProviderError>;
}

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
    pub(in crate::providers) files: Vec<String>,
    /// OpenAI's input file: the lines as sent.
    pub(in crate::providers) input_file: Option<String>,
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

/// One `DELETE`; a 404 means it is gone already.
pub(in crate::providers) async fn delete(
    connection: &Connection,
    path: &str,
) -> Result<(), ProviderError> {
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
pub(in crate::providers) fn json_lines(body: &[u8]) -> impl Iterator<Item = Value> + '_ {
    body.split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(Value::is_object)
}
