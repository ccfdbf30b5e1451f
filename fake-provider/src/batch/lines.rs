//! A batch's lines, read at creation and checked as each API checks them.

use std::collections::HashSet;

use serde_json::Value;

use super::{files::split, refusal, reject, Answer, Batches};
use crate::{render::Call, strict, Api, Behavior};

/// A batch's lines as (custom id, request, call), checked as the API checks them: OpenAI's
/// create body and input file, Anthropic's `requests`.
pub(super) fn read_lines(
    api: Api,
    batches: &Batches,
    body: &[u8],
    strict: bool,
) -> Result<Vec<(String, Value, Call)>, Answer> {
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
        return Err(refusal(api, Behavior::InvalidRequest));
    };
    let mut seen = HashSet::new();
    let mut lines = Vec::new();
    match api {
        Api::OpenAi => {
            const KNOWN: &[&str] = &[
                "input_file_id",
                "endpoint",
                "completion_window",
                "metadata",
                "output_expires_after",
            ];
            if let Some(unknown) = request
                .keys()
                .find(|k| strict && !KNOWN.contains(&k.as_str()))
            {
                return Err(reject(
                    api,
                    unknown,
                    &format!("Unrecognized request argument supplied: {unknown}"),
                ));
            }
            if request.get("completion_window").and_then(Value::as_str) != Some("24h") {
                return Err(reject(
                    api,
                    "completion_window",
                    "Invalid value: supported values are: '24h'",
                ));
            }
            let endpoint = request
                .get("endpoint")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if endpoint != "/v1/chat/completions" {
                return Err(reject(
                    api,
                    "endpoint",
                    "Invalid value: this fake serves '/v1/chat/completions'",
                ));
            }
            if strict {
                if let Some(fault) = metadata_fault(request.get("metadata").unwrap_or(&Value::Null))
                {
                    return Err(reject(api, "metadata", &fault));
                }
            }
            let file = request
                .get("input_file_id")
                .and_then(Value::as_str)
                .and_then(|id| batches.files.get(id));
            let Some(file) = file.filter(|f| f.purpose == "batch") else {
                return Err(reject(
                    api,
                    "input_file_id",
                    "No such file with purpose 'batch'",
                ));
            };
            let mut model = None;
            for (n, line) in split(&file.content, b"\n").into_iter().enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let fault =
                    |why: &str| reject(api, "input_file_id", &format!("line {}: {why}", n + 1));
                let Ok(Value::Object(line)) = serde_json::from_slice::<Value>(line) else {
                    return Err(fault("not a JSON object"));
                };
                let keys: HashSet<&str> = line.keys().map(String::as_str).collect();
                if keys != HashSet::from(["custom_id", "method", "url", "body"]) {
                    return Err(fault("a line has exactly custom_id, method, url and body"));
                }
                if line["method"] != "POST" || line["url"] != endpoint {
                    return Err(fault("method must be POST and url the batch's endpoint"));
                }
                let custom_id = line["custom_id"].as_str().unwrap_or_default().to_owned();
                if custom_id.is_empty() || !seen.insert(custom_id.clone()) {
                    return Err(fault("custom_id must be a unique string"));
                }
                let body = line["body"].clone();
                if strict {
                    if let Some(refused) = strict::check(api, &body) {
                        return Err(fault(&format!("body refused: {refused:?}")));
                    }
                    if body.get("stream") == Some(&Value::Bool(true)) {
                        return Err(fault("streaming is not supported in batches"));
                    }
                    if model.get_or_insert_with(|| body["model"].clone()) != &body["model"] {
                        return Err(fault("every line of a batch uses the same model"));
                    }
                }
                let call = Call::read(api, &body);
                lines.push((custom_id, body, call));
            }
        }
        Api::Anthropic => {
            if let Some(unknown) = request.keys().find(|k| strict && k.as_str() != "requests") {
                return Err(reject(api, unknown, "Extra inputs are not permitted"));
            }
            let Some(requests) = request.get("requests").and_then(Value::as_array) else {
                return Err(reject(api, "requests", "Field required"));
            };
            if requests.is_empty() {
                return Err(reject(api, "requests", "List should have at least 1 item"));
            }
            for (i, entry) in requests.iter().enumerate() {
                let at = |what: &str| format!("requests.{i}.{what}");
                if let Some(unknown) = entry
                    .as_object()
                    .into_iter()
                    .flat_map(|e| e.keys())
                    .find(|k| strict && !["custom_id", "params"].contains(&k.as_str()))
                {
                    return Err(reject(api, &at(unknown), "Extra inputs are not permitted"));
                }
                let custom_id = entry["custom_id"].as_str().unwrap_or_default().to_owned();
                let valid = (1..=64).contains(&custom_id.len())
                    && custom_id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
                if !valid {
                    return Err(reject(
                        api,
                        &at("custom_id"),
                        "String should match pattern '^[a-zA-Z0-9_-]{1,64}$'",
                    ));
                }
                if !seen.insert(custom_id.clone()) {
                    return Err(reject(
                        api,
                        &at("custom_id"),
                        "custom_id must be unique within a batch",
                    ));
                }
                let params = entry["params"].clone();
                if !params.is_object() {
                    return Err(reject(api, &at("params"), "Field required"));
                }
                if strict {
                    if let Some(Behavior::RejectParameter { param, message }) =
                        strict::check(api, &params)
                    {
                        return Err(reject(api, &at(&format!("params.{param}")), &message));
                    }
                }
                let call = Call::read(api, &params);
                lines.push((custom_id, params, call));
            }
        }
    }
    Ok(lines)
}

/// OpenAI's metadata: at most 16 pairs, keys up to 64 characters, string values up to 512.
fn metadata_fault(metadata: &Value) -> Option<String> {
    let pairs = match metadata {
        Value::Null => return None,
        Value::Object(pairs) => pairs,
        _ => return Some("metadata must be an object".into()),
    };
    if pairs.len() > 16 {
        return Some("metadata has at most 16 pairs".into());
    }
    pairs.iter().find_map(|(key, value)| {
        let fits = key.len() <= 64 && value.as_str().is_some_and(|v| v.len() <= 512);
        (!fits)
            .then(|| format!("metadata.{key}: keys up to 64 characters, string values up to 512"))
    })
}
