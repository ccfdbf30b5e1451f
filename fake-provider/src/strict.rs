//! Strict mode: refuse what the real APIs refuse in a request's shape, so a test catches a
//! client that sends an unknown parameter or an output schema some models reject.
//!
//! The schema rules are the strictest subset OpenAI's strict structured outputs and
//! Anthropic's tool input schemas share: every object lists all its properties as required
//! and sets `additionalProperties: false`, and no keyword outside a short list appears
//! (numeric and length constraints such as `minimum` or `maxLength` have been refused).

use serde_json::Value;

use crate::{Api, Behavior};

/// Top-level request fields the Chat Completions API knows.
const OPENAI_PARAMETERS: &[&str] = &[
    "model",
    "messages",
    "response_format",
    "reasoning_effort",
    "max_completion_tokens",
    "max_tokens",
    "temperature",
    "top_p",
    "n",
    "stop",
    "seed",
    "user",
    "metadata",
    "store",
    "stream",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "service_tier",
    "prompt_cache_key",
];

/// Top-level request fields the Messages API knows.
const ANTHROPIC_PARAMETERS: &[&str] = &[
    "model",
    "max_tokens",
    "system",
    "messages",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "metadata",
    "thinking",
    "service_tier",
];

/// Schema keywords inside the strict subset.
const SCHEMA_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "items",
    "anyOf",
    "description",
    "$ref",
    "$defs",
];

/// The refusal the real API would send for `body`, if any.
pub(crate) fn check(api: Api, body: &Value) -> Option<Behavior> {
    let fields = body.as_object()?;
    let known = match api {
        Api::OpenAi => OPENAI_PARAMETERS,
        Api::Anthropic => ANTHROPIC_PARAMETERS,
    };
    if let Some(unknown) = fields.keys().find(|k| !known.contains(&k.as_str())) {
        let message = match api {
            Api::OpenAi => format!("Unrecognized request argument supplied: {unknown}"),
            Api::Anthropic => "Extra inputs are not permitted".to_owned(),
        };
        return Some(refuse(unknown, message));
    }
    if let Some((param, message)) = value_fault(api, body) {
        return Some(refuse(&param, message));
    }
    let schemas: Vec<(String, &Value)> = match api {
        Api::OpenAi => body["response_format"]["json_schema"]["schema"]
            .is_object()
            .then(|| {
                (
                    "response_format".to_owned(),
                    &body["response_format"]["json_schema"]["schema"],
                )
            })
            .into_iter()
            .collect(),
        Api::Anthropic => body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, tool)| {
                (
                    format!("tools.{i}.custom.input_schema"),
                    &tool["input_schema"],
                )
            })
            .collect(),
    };
    schemas.into_iter().find_map(|(param, schema)| {
        schema_fault(schema, "root").map(|fault| refuse(&param, format!("Invalid schema: {fault}")))
    })
}

/// The service tiers each API accepts.
const OPENAI_TIERS: &[&str] = &["auto", "default", "flex", "scale", "priority"];
const ANTHROPIC_TIERS: &[&str] = &["auto", "standard_only"];

/// A parameter whose value the API refuses: a tier it does not sell, a cache key that is
/// not a string, a system block outside the text block's shape (`cache_control` included).
fn value_fault(api: Api, body: &Value) -> Option<(String, String)> {
    let tiers = match api {
        Api::OpenAi => OPENAI_TIERS,
        Api::Anthropic => ANTHROPIC_TIERS,
    };
    if let Some(tier) = body.get("service_tier") {
        if !tier.as_str().is_some_and(|t| tiers.contains(&t)) {
            return Some((
                "service_tier".into(),
                format!("Input should be one of {tiers:?}"),
            ));
        }
    }
    if api == Api::OpenAi {
        let key = body.get("prompt_cache_key");
        return key.filter(|k| !k.is_string()).map(|_| {
            (
                "prompt_cache_key".into(),
                "Input should be a valid string".into(),
            )
        });
    }
    let blocks = match body.get("system") {
        None | Some(Value::String(_)) => return None,
        Some(Value::Array(blocks)) => blocks,
        Some(_) => return Some(("system".into(), "Input should be a valid list".into())),
    };
    blocks.iter().enumerate().find_map(|(i, block)| {
        let fault = |what: &str| {
            Some((
                format!("system.{i}{what}"),
                "Input is not a valid text block".to_owned(),
            ))
        };
        let Some(fields) = block.as_object() else {
            return fault("");
        };
        if block["type"] != "text" || !block["text"].is_string() {
            return fault(".type");
        }
        if let Some(extra) = fields
            .keys()
            .find(|k| !["type", "text", "cache_control", "citations"].contains(&k.as_str()))
        {
            return fault(&format!(".{extra}"));
        }
        let cache = &block["cache_control"];
        let cache_fields_ok = cache
            .as_object()
            .is_some_and(|c| c.keys().all(|k| k == "type" || k == "ttl"));
        let valid_cache = cache.is_null()
            || (cache_fields_ok
                && cache["type"] == "ephemeral"
                && (cache["ttl"].is_null() || cache["ttl"] == "5m" || cache["ttl"] == "1h"));
        if !valid_cache {
            return fault(".cache_control");
        }
        None
    })
}

fn refuse(param: &str, message: String) -> Behavior {
    Behavior::RejectParameter {
        param: param.to_owned(),
        message,
    }
}

/// The first place `schema` leaves the strict subset, described as the APIs do.
fn schema_fault(schema: &Value, at: &str) -> Option<String> {
    let Some(fields) = schema.as_object() else {
        return Some(format!("in context={at}, a schema must be an object"));
    };
    if let Some(keyword) = fields
        .keys()
        .find(|k| !SCHEMA_KEYWORDS.contains(&k.as_str()))
    {
        return Some(format!("in context={at}, '{keyword}' is not permitted"));
    }
    if let Some(properties) = fields.get("properties").and_then(Value::as_object) {
        if fields.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Some(format!(
                "in context={at}, 'additionalProperties' is required to be supplied and to be false"
            ));
        }
        let required: Vec<&str> = fields
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(missing) = properties.keys().find(|k| !required.contains(&k.as_str())) {
            return Some(format!(
                "in context={at}, 'required' is required to include every key in properties; missing '{missing}'"
            ));
        }
        for (name, property) in properties {
            if let Some(fault) = schema_fault(property, &format!("{at}.{name}")) {
                return Some(fault);
            }
        }
    }
    let items = fields.get("items").into_iter();
    let any_of = fields
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    items
        .chain(any_of)
        .find_map(|inner| schema_fault(inner, &format!("{at}[]")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn openai(schema: Value) -> Value {
        json!({
            "model": "gpt-6-luna",
            "messages": [],
            "response_format": {"type": "json_schema", "json_schema": {"name": "t", "strict": true, "schema": schema}},
        })
    }

    fn param(refusal: Option<Behavior>) -> Option<String> {
        refusal.map(|b| match b {
            Behavior::RejectParameter { param, .. } => param,
            other => panic!("{other:?}"),
        })
    }

    #[test]
    fn the_strict_subset_is_accepted_and_anything_outside_it_refused_naming_the_parameter() {
        let good = json!({
            "type": "object",
            "properties": {"score": {"type": "number"}, "department": {"type": "string", "enum": ["a"]}},
            "required": ["score", "department"],
            "additionalProperties": false,
        });
        let mut minimum = good.clone();
        minimum["properties"]["score"]["minimum"] = json!(0);
        let mut open = good.clone();
        open["additionalProperties"] = json!(true);
        let mut optional = good.clone();
        optional["required"] = json!(["score"]);
        let mut unknown = openai(good.clone());
        unknown["temperature_boost"] = json!(1);
        // (request, the parameter refused)
        let table = [
            (openai(good.clone()), None),
            (openai(minimum), Some("response_format")),
            (openai(open), Some("response_format")),
            (openai(optional), Some("response_format")),
            (unknown, Some("temperature_boost")),
        ];
        for (body, expected) in table {
            assert_eq!(
                param(check(Api::OpenAi, &body)),
                expected.map(String::from),
                "{body}"
            );
        }
        let mut tool_schema = good;
        tool_schema["properties"]["score"]["maximum"] = json!(1);
        let anthropic = json!({"model": "m", "max_tokens": 1, "messages": [], "tools": [{"name": "t", "input_schema": tool_schema}]});
        assert_eq!(
            param(check(Api::Anthropic, &anthropic)).as_deref(),
            Some("tools.0.custom.input_schema")
        );
    }
}
