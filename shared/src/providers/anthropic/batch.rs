//! Anthropic's Message Batches: the lines as `{custom_id, params}` in one request; results as
//! JSONL, one `succeeded` / `errored` / `canceled` / `expired` result per custom id. The
//! batch itself carries no metadata, so the caller's reference travels in the custom ids.

use reqwest::{header::HeaderMap, Method, StatusCode};
use serde_json::{json, Value};

use super::{error_signals, parse_message, request_body};
use crate::providers::{
    batch::api::{json_lines, Batch, BatchApi, BatchLine, BatchRequest, BatchState, LineOutcome},
    http_common::{id_segment, unexpected_body, Body, Connection},
    http_errors::{status_error, ErrorInfo},
    ProviderError, ProviderReply,
};

/// Anthropic's Message Batches.
pub(in crate::providers) struct AnthropicBatches;

impl BatchApi for AnthropicBatches {
    const PATH: &'static str = "messages/batches";
    const AFTER: &'static str = "after_id";

    /// The reference travels in the custom ids, which the caller builds from it.
    async fn submit(
        connection: &Connection,
        _reference: &str,
        requests: &[BatchRequest<'_>],
    ) -> Result<Batch, ProviderError> {
        let requests: Vec<Value> = requests
            .iter()
            .map(|line| json!({"custom_id": line.custom_id, "params": request_body(&line.request)}))
            .collect();
        let body = Body::Json(json!({ "requests": requests }));
        let batch = connection
            .send(Method::POST, Self::PATH, body, connection.call_timeout())
            .await?;
        Self::parse(
            &serde_json::from_slice(&batch.body).map_err(|_| unexpected_body("a message batch"))?,
        )
    }

    fn parse(batch: &Value) -> Result<Batch, ProviderError> {
        let id = batch["id"]
            .as_str()
            .ok_or_else(|| unexpected_body("a message batch"))?;
        let state = match batch["processing_status"].as_str() {
            Some("in_progress" | "canceling") => BatchState::Running,
            Some("ended") => BatchState::Ended,
            _ => return Err(unexpected_body("a message batch")),
        };
        let counts = &batch["request_counts"];
        let count = |name: &str| counts[name].as_i64().unwrap_or(0);
        Ok(Batch {
            id: id_segment(id)?.to_owned(),
            reference: None,
            state,
            counts: (
                count("succeeded"),
                count("errored") + count("canceled") + count("expired"),
            ),
            files: Vec::new(),
            input_file: None,
        })
    }

    async fn results(
        connection: &Connection,
        batch: &Batch,
    ) -> Result<Vec<BatchLine>, ProviderError> {
        let path = format!("{}/{}/results", Self::PATH, id_segment(&batch.id)?);
        let content = connection
            .send(Method::GET, &path, Body::Empty, connection.call_timeout())
            .await?;
        Ok(json_lines(&content.body)
            .filter_map(|line| read_line(&line))
            .collect())
    }

    /// The batch itself, with its requests and results.
    fn text_paths(batch: &Batch) -> Result<Vec<String>, ProviderError> {
        Ok(vec![format!("{}/{}", Self::PATH, id_segment(&batch.id)?)])
    }
}

fn read_line(line: &Value) -> Option<BatchLine> {
    let custom_id = line["custom_id"].as_str()?.to_owned();
    let result = &line["result"];
    let outcome = match result["type"].as_str()? {
        "succeeded" => {
            let (output, usage) = parse_message(result["message"].to_string().as_bytes());
            LineOutcome::Answered(ProviderReply {
                output,
                usage,
                http_status: 200,
                rate: Default::default(),
                confidence: None,
            })
        }
        "errored" => {
            // The error the online endpoint would have answered with, without its status.
            let error = &result["error"];
            let status = match error["error"]["type"].as_str().unwrap_or_default() {
                "invalid_request_error" => 400,
                "authentication_error" => 401,
                "billing_error" => 402,
                "permission_error" => 403,
                "not_found_error" => 404,
                "request_too_large" => 413,
                "rate_limit_error" => 429,
                "overloaded_error" => 529,
                _ => 500,
            };
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let signals = error_signals(&ErrorInfo::parse(error.to_string().as_bytes()));
            LineOutcome::Failed(status_error(status, &HeaderMap::new(), &signals))
        }
        "canceled" | "expired" => LineOutcome::NotRun,
        _ => return None,
    };
    Some(BatchLine { custom_id, outcome })
}
