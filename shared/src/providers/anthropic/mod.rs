//! Anthropic Messages API, with the answer forced through one tool call whose input schema
//! is the output contract.
//!
//! Effort: Anthropic's reasoning knob (extended thinking) cannot be combined with a forced
//! `tool_choice`, so the effort half of the model version is not sent. It still names the
//! version, so results under different efforts keep different idempotency keys.
//!
//! Prompt caching: the system block (the prompt, the same for every ticket of a version)
//! carries `cache_control`, so Anthropic caches the prefix up to it and bills later reads at a
//! tenth of the input price. Message Batches: [`batch`].

pub(super) mod batch;

use reqwest::RequestBuilder;
use serde_json::{json, Value};

use super::{
    http_common::{self, WireFormat},
    http_errors::{ErrorInfo, ErrorSignals},
    EvaluationRequest, ModelOutput, Usage, MAX_OUTPUT_TOKENS,
};

const API_VERSION: &str = "2023-06-01";
const TOOL_NAME: &str = "record_triage";

/// The wire format behind `TRIAGE_PROVIDER=anthropic`.
pub static ANTHROPIC: WireFormat = WireFormat {
    name: "anthropic",
    path: "messages",
    authorize,
    request_body,
    parse_reply: parse_message,
    error_signals,
};

fn authorize(request: RequestBuilder, api_key: &str) -> RequestBuilder {
    request
        .header("x-api-key", api_key)
        .header("anthropic-version", API_VERSION)
}

fn request_body(request: &EvaluationRequest<'_>) -> Value {
    json!({
        "model": request.model.model(),
        "max_tokens": MAX_OUTPUT_TOKENS,
        "system": [{
            "type": "text",
            "text": request.prompt.text,
            "cache_control": {"type": "ephemeral"},
        }],
        "messages": [
            {"role": "user", "content": request.prompt.user_message(request.subject, request.message)},
        ],
        "tools": [{
            "name": TOOL_NAME,
            "description": "Record the triage of the support ticket.",
            "input_schema": http_common::output_schema(&request.policy.departments),
        }],
        "tool_choice": {"type": "tool", "name": TOOL_NAME},
    })
}

/// A 200 that is not a message is still a billed answer: it becomes `NotJson`.
fn parse_message(body: &[u8]) -> (ModelOutput, Usage) {
    let message = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    let Some(blocks) = message["content"].as_array() else {
        return (ModelOutput::NotJson { len: body.len() }, Usage::default());
    };
    let usage = &message["usage"];
    let count = |name: &str| usage[name].as_i64().unwrap_or(0);
    // Anthropic's `input_tokens` leaves out the cache's reads and writes; ours counts all input.
    let (read, written) = (
        count("cache_read_input_tokens"),
        count("cache_creation_input_tokens"),
    );
    let usage = Usage {
        input_tokens: count("input_tokens") + read + written,
        cached_input_tokens: read,
        cache_write_tokens: written,
        output_tokens: count("output_tokens"),
    };
    let output = match message["stop_reason"].as_str() {
        Some("refusal") => ModelOutput::Refusal,
        // A tool input cut at the token limit may be incomplete, even if it parses.
        Some("max_tokens") => ModelOutput::Truncated,
        _ => match blocks
            .iter()
            .find(|b| b["type"] == "tool_use" && b["name"] == TOOL_NAME)
        {
            Some(tool_use) => ModelOutput::Json(tool_use["input"].clone()),
            None => ModelOutput::NotJson {
                len: blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .map(str::len)
                    .sum(),
            },
        },
    };
    (output, usage)
}

fn error_signals(info: &ErrorInfo) -> ErrorSignals {
    ErrorSignals {
        label: info.label(),
        request_shape: info.names_request_parameter(),
        // "Credit balance too low" arrives as a 400, yet every call would fail alike.
        quota_exhausted: info.kind.as_deref() == Some("billing_error")
            || info.message_mentions("credit balance"),
        context_length: info.message_mentions("prompt is too long"),
        content_policy: info.message_mentions("content filtering policy"),
    }
}
