//! What each adapter sends: the model version, schema, prompt and key; the token cap; no
//! effort when the version has none; requests a strict provider accepts, and a refused
//! parameter; and one ledger entry per billed call.

use fake_provider::{classify, Api, Behavior, FakeProvider};
use serde_json::{json, Value};
use triage::providers::{FailureKind, ModelOutput, Prompt};

use super::{evaluate, evaluate_as, failure_of, policy, ticket, API_KEY, BOTH, CALL_TIMEOUT};

fn schema_departments(schema: &Value) -> Vec<String> {
    serde_json::from_value(schema["properties"]["department"]["enum"].clone()).unwrap()
}

#[tokio::test]
async fn the_openai_request_carries_the_model_version_schema_prompt_and_bearer_key() {
    let fake = FakeProvider::start().await;
    evaluate(Api::OpenAi, &fake).await.unwrap();
    let call = &fake.calls()[0];
    assert_eq!(call.api, Api::OpenAi);
    assert_eq!(call.ticket_text, ticket());
    assert_eq!(
        call.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    let body = &call.body;
    assert_eq!(body["model"], "gpt-6-luna");
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["prompt_cache_key"], "triage-v3");
    assert!(body.get("service_tier").is_none());
    let policy = policy();
    let prompt = Prompt::load("triage-v3", &policy).unwrap();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "developer", "content": prompt.text},
            {"role": "user", "content": ticket()},
        ])
    );
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    let schema = &format["json_schema"]["schema"];
    assert_eq!(schema_departments(schema), policy.departments);
    assert_eq!(
        schema["required"],
        json!(["is_urgent", "department", "urgency_score"])
    );
    assert_eq!(schema["additionalProperties"], false);
}

#[tokio::test]
async fn every_request_caps_the_answer_s_tokens() {
    let fake = FakeProvider::start().await;
    for api in BOTH {
        evaluate(api, &fake).await.unwrap();
    }
    let calls = fake.calls();
    let cap = triage::providers::MAX_OUTPUT_TOKENS;
    assert_eq!(calls[0].body["max_completion_tokens"], cap, "OpenAI");
    assert_eq!(calls[1].body["max_tokens"], cap, "Anthropic");
}

#[tokio::test]
async fn the_openai_request_omits_reasoning_effort_when_the_version_has_none() {
    let fake = FakeProvider::start().await;
    evaluate_as(Api::OpenAi, &fake.url(), "gpt-4o", CALL_TIMEOUT)
        .await
        .unwrap();
    let body = &fake.calls()[0].body;
    assert_eq!(body["model"], "gpt-4o");
    assert!(body.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn the_anthropic_request_forces_the_triage_tool_with_the_policy_schema_and_key_headers() {
    let fake = FakeProvider::start().await;
    evaluate_as(
        Api::Anthropic,
        &fake.url(),
        "claude-sonnet-5@high",
        CALL_TIMEOUT,
    )
    .await
    .unwrap();
    let call = &fake.calls()[0];
    assert_eq!(call.api, Api::Anthropic);
    assert_eq!(call.header("x-api-key"), Some(API_KEY));
    assert_eq!(call.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(call.header("authorization"), None);
    let body = &call.body;
    assert_eq!(body["model"], "claude-sonnet-5");
    let policy = policy();
    let prompt = Prompt::load("triage-v3", &policy).unwrap();
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": prompt.text, "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": ticket()}])
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "record_triage"})
    );
    assert_eq!(body["tools"][0]["name"], "record_triage");
    assert_eq!(
        schema_departments(&body["tools"][0]["input_schema"]),
        policy.departments
    );
    assert!(body["max_tokens"].as_u64().unwrap() > 0);
    // Effort stays part of the model version only (see the adapter's docs).
    assert!(!body.to_string().contains("\"high\""));
}

#[tokio::test]
async fn every_billed_call_is_one_ledger_entry_per_evaluation() {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        fake.push(Behavior::Status(503));
        fake.push(Behavior::ResetConnection);
        for _ in 0..3 {
            let _ = evaluate(api, &fake).await;
        }
        let calls = fake.calls();
        assert_eq!(
            calls.iter().map(|c| c.status).collect::<Vec<_>>(),
            [503, 0, 200],
            "{api:?}"
        );
        assert_eq!(fake.billed_by_content().get(&ticket()), Some(&1));
    }
}

#[tokio::test]
async fn both_adapters_send_a_request_a_strict_provider_accepts() {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        fake.set_strict(true);
        let reply = evaluate(api, &fake)
            .await
            .unwrap_or_else(|e| panic!("{api:?}: the strict fake refused our request: {e}"));
        assert_eq!(
            reply.output,
            ModelOutput::Json(classify(&ticket())),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn a_refused_request_parameter_is_provider_wide_on_both_apis() {
    let refusals = [
        ("response_format", "Invalid schema for response_format 'triage': In context=('properties', 'is_urgent'), 'minimum' is not permitted."),
        ("reasoning_effort", "Unsupported parameter: 'reasoning_effort' is not supported with this model."),
        ("tools", "tools.0.custom.input_schema: JSON schema is invalid"),
    ];
    for api in BOTH {
        for (param, message) in refusals {
            let behavior = Behavior::RejectParameter {
                param: param.into(),
                message: message.into(),
            };
            let error = failure_of(api, behavior).await;
            assert_eq!(error.kind, FailureKind::RequestRejected, "{api:?} {param}");
            assert_eq!(error.http_status, Some(400));
        }
        // The ticket's own faults stay the ticket's.
        for (behavior, kind) in [
            (Behavior::ContextLength, FailureKind::ContextLength),
            (Behavior::ContentPolicy, FailureKind::ContentPolicy),
            (Behavior::InvalidRequest, FailureKind::InvalidRequest),
        ] {
            assert_eq!(failure_of(api, behavior).await.kind, kind, "{api:?}");
        }
    }
}
