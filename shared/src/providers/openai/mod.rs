//! OpenAI Chat Completions with strict structured output (`response_format: json_schema`),
//! its flex tier, and its Batch API ([`batch`]).
//!
//! Prompt caching is automatic at OpenAI for a repeated prefix: the prompt (developer message)
//! comes first and the ticket last, and `prompt_cache_key` (the prompt version) routes calls
//! sharing that prefix to the same cache.

pub(super) mod batch;

use reqwest::RequestBuilder;
use serde_json::{json, Value};

use super::{
    http_common::{self, WireFormat},
    http_errors::{ErrorInfo, ErrorSignals},
    EvaluationRequest, ModelOutput, Tier, Usage, MAX_OUTPUT_TOKENS,
};

/// The wire format behind `TRIAGE_PROVIDER=openai`.
pub static OPENAI: WireFormat = WireFormat {
    name: "openai",
    path: "chat/completions",
    authorize,
    request_body,
    parse_reply: parse_completion,
    error_signals,
};

fn authorize(request: RequestBuilder, api_key: &str) -> RequestBuilder {
    request.bearer_auth(api_key)
}

fn request_body(request: &EvaluationRequest<'_>) -> Value {
    let mut body = json!({
        "model": request.model.model(),
        "max_completion_tokens": MAX_OUTPUT_TOKENS,
        "prompt_cache_key": request.prompt.registered_as,
        "messages": [
            {"role": "developer", "content": request.prompt.text},
            {"role": "user", "content": request.prompt.user_message(request.subject, request.message)},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "triage",
                "strict": true,
                "schema": http_common::output_schema(&request.policy.departments),
            },
        },
    });
    // Non-reasoning models reject the field, so a version without effort sends none.
    if !request.model.effort().is_empty() {
        body["reasoning_effort"] = json!(request.model.effort());
    }
    if request.tier == Tier::Flex {
        body["service_tier"] = json!("flex");
    }
    body
}

/// A 200 that is not a chat completion is still a billed answer: it becomes `NotJson`.
fn parse_completion(body: &[u8]) -> (ModelOutput, Usage) {
    let Ok(completion) = serde_json::from_slice::<Value>(body) else {
        return (ModelOutput::NotJson { len: body.len() }, Usage::default());
    };
    let usage = &completion["usage"];
    let usage = Usage {
        input_tokens: usage["prompt_tokens"].as_i64().unwrap_or(0),
        cached_input_tokens: usage["prompt_tokens_details"]["cached_tokens"]
            .as_i64()
            .unwrap_or(0),
        cache_write_tokens: 0,
        output_tokens: usage["completion_tokens"].as_i64().unwrap_or(0),
    };
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let output = match choice["finish_reason"].as_str() {
        Some("content_filter") => ModelOutput::ContentFiltered,
        _ if !message["refusal"].is_null() => ModelOutput::Refusal,
        Some("length") => ModelOutput::Truncated,
        _ => match message["content"].as_str() {
            Some(text) => serde_json::from_str(text)
                .map(ModelOutput::Json)
                .unwrap_or(ModelOutput::NotJson { len: text.len() }),
            None => ModelOutput::NotJson { len: body.len() },
        },
    };
    (output, usage)
}

fn error_signals(info: &ErrorInfo) -> ErrorSignals {
    let code = info.code.as_deref();
    ErrorSignals {
        label: info.label(),
        request_shape: info.names_request_parameter(),
        quota_exhausted: code == Some("insufficient_quota")
            || info.kind.as_deref() == Some("insufficient_quota"),
        context_length: code == Some("context_length_exceeded"),
        content_policy: matches!(code, Some("content_policy_violation" | "content_filter")),
    }
}
