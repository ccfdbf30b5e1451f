//! OpenAI's Batch API: the lines as one JSONL file uploaded with `purpose=batch` and named
//! after our reference, then a batch over it with `completion_window: "24h"` and the reference
//! in its `metadata`. Answers come back in the output file; failed, expired and cancelled
//! lines in the error file.

use std::io::Write;

use reqwest::{header::HeaderMap, Method, StatusCode};
use serde_json::{json, Value};

use super::{error_signals, parse_completion, request_body};
use crate::providers::{
    batch::api::{
        delete, json_lines, Batch, BatchApi, BatchLine, BatchRequest, BatchState, LineOutcome,
        REFERENCE_KEY,
    },
    http_common::{id_segment, unexpected_body, Body, Connection},
    http_errors::{status_error, ErrorInfo},
    FailureKind, ProviderError, ProviderReply,
};

/// The endpoint every line calls.
const ENDPOINT: &str = "/v1/chat/completions";

/// OpenAI's Batch API.
pub(in crate::providers) struct OpenAiBatches;

impl BatchApi for OpenAiBatches {
    const PATH: &'static str = "batches";
    const AFTER: &'static str = "after";

    async fn submit(
        connection: &Connection,
        reference: &str,
        requests: &[BatchRequest<'_>],
    ) -> Result<Batch, ProviderError> {
        let mut jsonl = Vec::new();
        for line in requests {
            let line = json!({
                "custom_id": line.custom_id,
                "method": "POST",
                "url": ENDPOINT,
                "body": request_body(&line.request),
            });
            jsonl.extend_from_slice(line.to_string().as_bytes());
            jsonl.push(b'\n');
        }
        let timeout = connection.call_timeout();
        let upload = multipart(&format!("{reference}.jsonl"), &jsonl);
        let file = connection
            .send(Method::POST, "files", upload, timeout)
            .await?;
        let file: Value =
            serde_json::from_slice(&file.body).map_err(|_| unexpected_body("a file object"))?;
        let file_id = file["id"]
            .as_str()
            .ok_or_else(|| unexpected_body("a file object"))?;
        let create = json!({
            "input_file_id": file_id,
            "endpoint": ENDPOINT,
            "completion_window": "24h",
            "metadata": {REFERENCE_KEY: reference},
        });
        let batch = match connection
            .send(Method::POST, Self::PATH, Body::Json(create), timeout)
            .await
        {
            Ok(batch) => batch,
            Err(error) => {
                // Refused: no batch holds the file, so nothing would ever delete it. (Without an
                // answer a batch may exist; adopted, it is deleted with its input file.)
                if error.http_status.is_some() {
                    let path = format!("files/{}", id_segment(file_id)?);
                    if let Err(not_deleted) = delete(connection, &path).await {
                        tracing::warn!(error = %not_deleted, file = file_id, "a refused batch's input file was not deleted");
                    }
                }
                return Err(error);
            }
        };
        Self::parse(&serde_json::from_slice(&batch.body).map_err(|_| unexpected_body("a batch"))?)
    }

    fn parse(batch: &Value) -> Result<Batch, ProviderError> {
        let id = batch["id"]
            .as_str()
            .ok_or_else(|| unexpected_body("a batch"))?;
        let state = match batch["status"].as_str() {
            Some("validating" | "in_progress" | "finalizing" | "cancelling") => BatchState::Running,
            Some("completed" | "expired" | "cancelled" | "failed") => BatchState::Ended,
            _ => return Err(unexpected_body("a batch")),
        };
        let counts = &batch["request_counts"];
        let count = |name: &str| counts[name].as_i64().unwrap_or(0);
        Ok(Batch {
            id: id_segment(id)?.to_owned(),
            reference: batch["metadata"][REFERENCE_KEY].as_str().map(str::to_owned),
            state,
            counts: (count("completed"), count("failed")),
            files: ["output_file_id", "error_file_id"]
                .iter()
                .filter_map(|name| batch[*name].as_str().map(str::to_owned))
                .collect(),
            input_file: batch["input_file_id"].as_str().map(str::to_owned),
        })
    }

    async fn results(
        connection: &Connection,
        batch: &Batch,
    ) -> Result<Vec<BatchLine>, ProviderError> {
        let mut lines = Vec::new();
        for file in &batch.files {
            let path = format!("files/{}/content", id_segment(file)?);
            let content = connection
                .send(Method::GET, &path, Body::Empty, connection.call_timeout())
                .await?;
            lines.extend(json_lines(&content.body).filter_map(|line| read_line(&line)));
        }
        Ok(lines)
    }

    /// The input file and the output and error files: the batch object itself holds no text,
    /// and cannot be deleted.
    fn text_paths(batch: &Batch) -> Result<Vec<String>, ProviderError> {
        batch
            .input_file
            .iter()
            .chain(&batch.files)
            .map(|file| Ok(format!("files/{}", id_segment(file)?)))
            .collect()
    }
}

/// `multipart/form-data` with `purpose=batch` and the file, built by hand: two fixed parts do
/// not warrant another HTTP feature in every Lambda. The boundary is one the file never holds.
fn multipart(filename: &str, content: &[u8]) -> Body {
    let boundary = (0u64..)
        .map(|n| format!("triage-batch-boundary-{n}"))
        .find(|b| !content.windows(b.len()).any(|w| w == b.as_bytes()))
        .expect("some boundary is absent from a finite file");
    let mut bytes = Vec::with_capacity(content.len() + 400);
    // Writing to a Vec cannot fail.
    let _ = write!(
        bytes,
        "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\
         Content-Type: application/jsonl\r\n\r\n"
    );
    bytes.extend_from_slice(content);
    let _ = write!(bytes, "\r\n--{boundary}--\r\n");
    Body::Raw {
        content_type: format!("multipart/form-data; boundary={boundary}"),
        bytes,
    }
}

/// One line of an output or error file: the response the online endpoint would have sent,
/// or an error without one (`batch_expired`, `batch_cancelled`: never run).
fn read_line(line: &Value) -> Option<BatchLine> {
    let custom_id = line["custom_id"].as_str()?.to_owned();
    let response = &line["response"];
    let outcome = match response["status_code"].as_u64() {
        Some(200) => {
            let (output, usage) = parse_completion(response["body"].to_string().as_bytes());
            LineOutcome::Answered(ProviderReply {
                output,
                usage,
                http_status: 200,
                rate: Default::default(),
                confidence: None,
            })
        }
        Some(status) => {
            let status = u16::try_from(status)
                .ok()
                .and_then(|s| StatusCode::from_u16(s).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = response["body"].to_string();
            let signals = error_signals(&ErrorInfo::parse(body.as_bytes()));
            LineOutcome::Failed(status_error(status, &HeaderMap::new(), &signals))
        }
        None => match line["error"]["code"].as_str() {
            Some("batch_expired" | "batch_cancelled") => LineOutcome::NotRun,
            _ => LineOutcome::Failed(ProviderError::new(
                FailureKind::ServerError,
                "a batch line failed without a response",
            )),
        },
    };
    Some(BatchLine { custom_id, outcome })
}
