//! Behaviours in each provider's own words: the status, headers and body shapes the real
//! APIs send.

use std::time::Duration;

use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{json, Value};

use crate::{departments::classify_in, prefix_tokens, Api, Behavior, TokenUsage};

/// What the fake read from a request.
#[derive(Clone)]
pub(crate) struct Call {
    pub api: Api,
    pub ticket_text: String,
    pub model: String,
    /// Anthropic: the tool the request forces, which the answer must use.
    pub tool: String,
    /// The departments the request's output schema allows (a desk's taxonomy); empty when it
    /// names none, and [`classify_in`] answers in `policy-v1`'s.
    pub departments: Vec<String>,
    pub prefix: Prefix,
    /// What the answer reports, set once the prompt cache has been asked.
    pub usage: TokenUsage,
}

/// The prompt before the ticket, as the prompt cache sees it.
#[derive(Clone, Default)]
pub(crate) struct Prefix {
    /// What a cache hit is keyed on (the prefix, the model and any cache key); `None` when
    /// nothing in the request may be cached.
    pub cache_key: Option<String>,
    /// Tokens of the part that may be cached.
    pub cacheable: i64,
    /// Tokens of the part that may not.
    pub plain: i64,
}

/// Message content as text: a string, or the text of its blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

impl Call {
    pub fn read(api: Api, body: &Value) -> Self {
        let messages = body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let user = messages.iter().rposition(|m| m["role"] == "user");
        let ticket_text = user
            .map(|i| text_of(&messages[i]["content"]))
            .unwrap_or_default();
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        let schema = match api {
            Api::Anthropic => &body["tools"][0]["input_schema"],
            Api::OpenAi => &body["response_format"]["json_schema"]["schema"],
        };
        let departments = schema["properties"]["department"]["enum"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let (tool, prefix) = match api {
            Api::Anthropic => (
                body["tool_choice"]["name"].as_str(),
                anthropic_prefix(&model, &body["system"]),
            ),
            Api::OpenAi => {
                // Automatic caching: every message before the ticket, per model and cache key.
                let before: String = messages[..user.unwrap_or(0)]
                    .iter()
                    .map(|m| text_of(&m["content"]))
                    .collect();
                let key = body["prompt_cache_key"].as_str().unwrap_or_default();
                let prefix = Prefix {
                    cache_key: Some(format!("openai\0{model}\0{key}\0{before}")),
                    cacheable: prefix_tokens(&before),
                    plain: 0,
                };
                (None, prefix)
            }
        };
        Self {
            api,
            ticket_text,
            model,
            tool: tool.unwrap_or("record_triage").to_owned(),
            departments,
            prefix,
            usage: TokenUsage::default(),
        }
    }
}

/// Anthropic caches the system blocks up to the last one marked `cache_control`, and nothing
/// without one.
fn anthropic_prefix(model: &str, system: &Value) -> Prefix {
    let blocks = match system {
        Value::Array(blocks) => blocks.as_slice(),
        other => {
            return Prefix {
                plain: prefix_tokens(&text_of(other)),
                ..Prefix::default()
            }
        }
    };
    let text =
        |blocks: &[Value]| -> String { blocks.iter().filter_map(|b| b["text"].as_str()).collect() };
    match blocks.iter().rposition(|b| b["cache_control"].is_object()) {
        Some(last) => {
            let cached = text(&blocks[..=last]);
            Prefix {
                cacheable: prefix_tokens(&cached),
                plain: prefix_tokens(&text(&blocks[last + 1..])),
                cache_key: Some(format!("anthropic\0{model}\0{cached}")),
            }
        }
        None => Prefix {
            plain: prefix_tokens(&text(blocks)),
            ..Prefix::default()
        },
    }
}

pub(crate) enum Reply {
    Send {
        status: StatusCode,
        retry_after: Option<String>,
        body: Bytes,
    },
    Reset,
    Hang,
}

/// What the model said, before it is put in either API's envelope.
enum Answer {
    Json(Value),
    Prose,
    Refusal,
    Filtered,
    Truncated,
}

/// The error behaviours, before they are put in either API's words.
enum Failure {
    RateLimited,
    ResourceUnavailable,
    Quota,
    Server(StatusCode),
    Overloaded,
    Unauthorized,
    ModelNotFound,
    ContextLength,
    ContentPolicy,
    InvalidRequest,
    RejectParameter { param: String, message: String },
}

const PROSE: &str = "This looks like a billing question and it seems fairly urgent.";

/// The caller waits out any delay (see `Behavior::split_delay`); here a `Delay` answers
/// like the behaviour it wraps.
pub(crate) fn reply(behavior: &Behavior, api: Api, call: &Call) -> Reply {
    let (failure, retry_after) = match behavior {
        Behavior::ResetConnection => return Reply::Reset,
        Behavior::Hang => return Reply::Hang,
        Behavior::MalformedJson => {
            return Reply::Send {
                status: StatusCode::OK,
                retry_after: None,
                body: Bytes::from_static(br#"{"id": "fake", "choices": [{"message": "#),
            }
        }
        Behavior::Delay(_, inner) | Behavior::Held(_, inner) => return reply(inner, api, call),
        Behavior::Classify => {
            return answer(
                api,
                call,
                Answer::Json(classify_in(&call.ticket_text, &call.departments)),
            )
        }
        Behavior::Answer(value) => return answer(api, call, Answer::Json(value.clone())),
        Behavior::OutOfContract => {
            let value = json!({"is_urgent": 0.5, "department": "legal", "urgency_score": 0.5});
            return answer(api, call, Answer::Json(value));
        }
        Behavior::NotJsonContent => return answer(api, call, Answer::Prose),
        Behavior::Refusal => return answer(api, call, Answer::Refusal),
        Behavior::ContentFilter => return answer(api, call, Answer::Filtered),
        Behavior::Truncated => return answer(api, call, Answer::Truncated),
        Behavior::RateLimited { retry_after } => (Failure::RateLimited, *retry_after),
        Behavior::ResourceUnavailable => (Failure::ResourceUnavailable, None),
        Behavior::Overloaded { retry_after } => (Failure::Overloaded, *retry_after),
        Behavior::QuotaExhausted => (Failure::Quota, None),
        Behavior::Status(code) => {
            let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (Failure::Server(status), None)
        }
        Behavior::Unauthorized => (Failure::Unauthorized, None),
        Behavior::ModelNotFound => (Failure::ModelNotFound, None),
        Behavior::ContextLength => (Failure::ContextLength, None),
        Behavior::ContentPolicy => (Failure::ContentPolicy, None),
        Behavior::InvalidRequest => (Failure::InvalidRequest, None),
        Behavior::RejectParameter { param, message } => (
            Failure::RejectParameter {
                param: param.clone(),
                message: message.clone(),
            },
            None,
        ),
    };
    let (status, body) = match api {
        Api::OpenAi => openai_error(&failure, call),
        Api::Anthropic => anthropic_error(&failure, call),
    };
    Reply::Send {
        status,
        retry_after: retry_after.map(delta_seconds),
        body: Bytes::from(body.to_string()),
    }
}

/// Whole seconds as an integer, as servers usually send them; fractions for short test
/// delays.
fn delta_seconds(delay: Duration) -> String {
    if delay.subsec_nanos() == 0 {
        delay.as_secs().to_string()
    } else {
        format!("{:.3}", delay.as_secs_f64())
    }
}

fn answer(api: Api, call: &Call, answer: Answer) -> Reply {
    let usage = call.usage;
    let body = match api {
        Api::OpenAi => {
            let (content, refusal, finish_reason) = match answer {
                Answer::Json(value) => (json!(value.to_string()), Value::Null, "stop"),
                Answer::Prose => (json!(PROSE), Value::Null, "stop"),
                Answer::Refusal => (Value::Null, json!("I can't help with that."), "stop"),
                Answer::Filtered => (Value::Null, Value::Null, "content_filter"),
                Answer::Truncated => (json!(r#"{"is_urgent": 0.4, "depa"#), Value::Null, "length"),
            };
            json!({
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": call.model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "finish_reason": finish_reason,
                }],
                "usage": {
                    "prompt_tokens": usage.input_tokens,
                    "completion_tokens": usage.output_tokens,
                    "total_tokens": usage.input_tokens + usage.output_tokens,
                    "prompt_tokens_details": {
                        "cached_tokens": usage.cached_input_tokens,
                        "audio_tokens": 0,
                    },
                },
            })
        }
        Api::Anthropic => {
            let tool_use = |input: Value| {
                json!([{
                    "type": "tool_use",
                    "id": "toolu_fake",
                    "name": call.tool,
                    "input": input,
                }])
            };
            let (content, stop_reason) = match answer {
                Answer::Json(value) => (tool_use(value), "tool_use"),
                Answer::Prose => (json!([{"type": "text", "text": PROSE}]), "end_turn"),
                Answer::Refusal | Answer::Filtered => (json!([]), "refusal"),
                Answer::Truncated => (tool_use(json!({"is_urgent": 0.4})), "max_tokens"),
            };
            json!({
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": call.model,
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": null,
                // Anthropic's input_tokens leaves out the cache's reads and writes.
                "usage": {
                    "input_tokens": usage.input_tokens
                        - usage.cached_input_tokens
                        - usage.cache_write_tokens,
                    "cache_creation_input_tokens": usage.cache_write_tokens,
                    "cache_read_input_tokens": usage.cached_input_tokens,
                    "output_tokens": usage.output_tokens,
                },
            })
        }
    };
    Reply::Send {
        status: StatusCode::OK,
        retry_after: None,
        body: Bytes::from(body.to_string()),
    }
}

fn openai_error(failure: &Failure, call: &Call) -> (StatusCode, Value) {
    let invalid = "invalid_request_error";
    let (status, kind, code, message) = match failure {
        Failure::RateLimited => (
            429,
            "requests",
            Some("rate_limit_exceeded"),
            "Rate limit reached for requests.".to_owned(),
        ),
        Failure::ResourceUnavailable => (
            429,
            "server_error",
            Some("resource_unavailable"),
            "Resource unavailable: no flex capacity right now, please retry later.".to_owned(),
        ),
        Failure::Quota => (
            429,
            "insufficient_quota",
            Some("insufficient_quota"),
            "You exceeded your current quota, please check your plan and billing details."
                .to_owned(),
        ),
        Failure::Server(status) => (
            status.as_u16(),
            "server_error",
            None,
            "The server had an error while processing your request.".to_owned(),
        ),
        Failure::Overloaded => (
            503,
            "server_error",
            None,
            "The engine is currently overloaded, please try again later.".to_owned(),
        ),
        Failure::Unauthorized => (
            401,
            invalid,
            Some("invalid_api_key"),
            "Incorrect API key provided.".to_owned(),
        ),
        Failure::ModelNotFound => (
            404,
            invalid,
            Some("model_not_found"),
            format!(
                "The model `{}` does not exist or you do not have access to it.",
                call.model
            ),
        ),
        Failure::ContextLength => (
            400,
            invalid,
            Some("context_length_exceeded"),
            "This model's maximum context length is 128000 tokens.".to_owned(),
        ),
        Failure::ContentPolicy => (
            400,
            invalid,
            Some("content_policy_violation"),
            "Your request was rejected as a result of our safety system.".to_owned(),
        ),
        Failure::InvalidRequest => (400, invalid, None, "Invalid request.".to_owned()),
        Failure::RejectParameter { param, message } => {
            let body = json!({"error": {"message": message, "type": invalid, "param": param, "code": null}});
            return (status_code(400), body);
        }
    };
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    (status_code(status), body)
}

fn anthropic_error(failure: &Failure, call: &Call) -> (StatusCode, Value) {
    let invalid = "invalid_request_error";
    let (status, kind, message) = match failure {
        Failure::RateLimited | Failure::ResourceUnavailable => (
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit.".to_owned(),
        ),
        Failure::Quota => (
            402,
            "billing_error",
            "Your credit balance is too low to access the Anthropic API.".to_owned(),
        ),
        Failure::Server(status) if status.as_u16() == 529 => {
            (529, "overloaded_error", "Overloaded".to_owned())
        }
        Failure::Server(status) => (
            status.as_u16(),
            "api_error",
            "Internal server error".to_owned(),
        ),
        Failure::Overloaded => (529, "overloaded_error", "Overloaded".to_owned()),
        Failure::Unauthorized => (401, "authentication_error", "invalid x-api-key".to_owned()),
        Failure::ModelNotFound => (404, "not_found_error", format!("model: {}", call.model)),
        Failure::ContextLength => (
            400,
            invalid,
            "prompt is too long: 212345 tokens > 200000 maximum".to_owned(),
        ),
        Failure::ContentPolicy => (
            400,
            invalid,
            "Output blocked by content filtering policy".to_owned(),
        ),
        Failure::InvalidRequest => (400, invalid, "messages: field required".to_owned()),
        // Anthropic names the parameter as the path before its message.
        Failure::RejectParameter { param, message } => {
            (400, invalid, format!("{param}: {message}"))
        }
    };
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status_code(status), body)
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).expect("the fake only sends valid statuses")
}
