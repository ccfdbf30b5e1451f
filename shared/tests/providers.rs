//! The OpenAI and Anthropic adapters against the fake provider over loopback HTTP: every
//! behaviour maps to the reply or failure the outbox expects, with one request per call.
//! The cheaper tiers (prompt caching, flex, batches) are in `providers/tiers.rs`.

#[path = "providers/tiers.rs"]
mod tiers;

use std::time::{Duration, Instant};

use fake_provider::{classify, prefix_tokens, usage_for, Api, Behavior, FakeProvider};
use serde_json::{json, Value};
use triage::{
    domain::versions::ModelVersion,
    providers::{
        contract, ticket_text, AnyProvider, EvaluationRequest, FailureKind, ModelOutput, Policy,
        Prompt, Provider, ProviderConfig, ProviderError, ProviderKind, ProviderReply, Tier, Usage,
    },
    secret::Secret,
};

const SUBJECT: &str = "Card charged twice";
const MESSAGE: &str = "I was billed two times for order 42. Please refund one.";
const API_KEY: &str = "sk-test-not-a-real-key";
const BOTH: [Api; 2] = [Api::OpenAi, Api::Anthropic];
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

fn ticket() -> String {
    ticket_text(SUBJECT, MESSAGE)
}

fn policy() -> Policy {
    Policy::load("policy-v1").unwrap()
}

/// The adapter for `api`, configured with a model version the calls do not use, so tests
/// can tell that the model comes from the request.
fn provider(api: Api, url: &str) -> AnyProvider {
    AnyProvider::from_config(&config(api, url), CALL_TIMEOUT).unwrap()
}

fn config(api: Api, url: &str) -> ProviderConfig {
    ProviderConfig {
        kind: match api {
            Api::OpenAi => ProviderKind::OpenAi,
            Api::Anthropic => ProviderKind::Anthropic,
        },
        url: url.to_owned(),
        api_key: Secret::from(API_KEY).into(),
        api_key_secret_arn: None,
        prices: Default::default(),
    }
}

async fn evaluate_as(
    api: Api,
    url: &str,
    model: &str,
    timeout: Duration,
) -> Result<ProviderReply, ProviderError> {
    let policy = policy();
    let prompt = Prompt::load("triage-v3", &policy).unwrap();
    let model = ModelVersion::from_stored(model);
    provider(api, url)
        .evaluate(EvaluationRequest {
            subject: SUBJECT,
            message: MESSAGE,
            prompt: &prompt,
            model: &model,
            policy: &policy,
            timeout,
            tier: Tier::Online,
        })
        .await
}

async fn evaluate(api: Api, fake: &FakeProvider) -> Result<ProviderReply, ProviderError> {
    evaluate_as(api, &fake.url(), "gpt-6-luna@high", CALL_TIMEOUT).await
}

/// A fresh fake answers one call on `api` with `behavior`.
async fn reply_to(api: Api, behavior: Behavior) -> Result<ProviderReply, ProviderError> {
    let fake = FakeProvider::start().await;
    fake.push(behavior);
    let result = evaluate(api, &fake).await;
    assert_eq!(fake.calls().len(), 1, "{api:?}: exactly one request");
    result
}

async fn output_of(api: Api, behavior: Behavior) -> ModelOutput {
    let reply = reply_to(api, behavior)
        .await
        .unwrap_or_else(|e| panic!("{api:?}: {e}"));
    assert_eq!(reply.http_status, 200);
    reply.output
}

async fn failure_of(api: Api, behavior: Behavior) -> ProviderError {
    let error = reply_to(api, behavior)
        .await
        .err()
        .unwrap_or_else(|| panic!("{api:?}: expected a failure"));
    assert!(
        !error.detail.contains(SUBJECT) && !error.detail.contains(API_KEY),
        "{api:?}: detail leaks the request: {}",
        error.detail
    );
    error
}

/// What a fresh fake bills the first call on `api`: the prompt and the ticket, the prompt
/// written to Anthropic's cache (OpenAI caches without saying so).
fn fake_usage(api: Api) -> Usage {
    let prompt = Prompt::load("triage-v3", &policy()).unwrap();
    let prefix = prefix_tokens(&prompt.text);
    let usage = usage_for(&ticket());
    Usage {
        input_tokens: usage.input_tokens + prefix,
        cached_input_tokens: 0,
        cache_write_tokens: if api == Api::Anthropic { prefix } else { 0 },
        output_tokens: usage.output_tokens,
    }
}

#[tokio::test]
async fn a_classification_comes_back_as_json_with_the_billed_usage() {
    for api in BOTH {
        let reply = reply_to(api, Behavior::Classify).await.unwrap();
        assert_eq!(
            reply,
            ProviderReply {
                output: ModelOutput::Json(classify(&ticket())),
                usage: fake_usage(api),
                http_status: 200,
                rate: Default::default(),
                confidence: None,
            },
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn an_exact_answer_is_passed_through_unchanged() {
    let answer = json!({"is_urgent": 1, "department": "sales", "urgency_score": 0.25});
    for api in BOTH {
        assert_eq!(
            output_of(api, Behavior::Answer(answer.clone())).await,
            ModelOutput::Json(answer.clone()),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn an_out_of_contract_answer_is_returned_for_the_contract_to_reject() {
    for api in BOTH {
        let output = output_of(api, Behavior::OutOfContract).await;
        assert!(
            matches!(&output, ModelOutput::Json(v) if v["department"] == "legal"),
            "{api:?}"
        );
        assert!(contract::validate(&output, &policy()).is_err(), "{api:?}");
    }
}

#[tokio::test]
async fn a_rate_limit_is_rate_limited_with_its_fractional_retry_after() {
    for api in BOTH {
        let error = failure_of(
            api,
            Behavior::RateLimited {
                retry_after: Some(Duration::from_millis(1500)),
            },
        )
        .await;
        assert_eq!(error.kind, FailureKind::RateLimited, "{api:?}");
        assert_eq!(error.http_status, Some(429));
        assert_eq!(error.retry_after, Some(Duration::from_millis(1500)));
    }
}

#[tokio::test]
async fn a_rate_limit_without_retry_after_leaves_the_wait_to_the_backoff() {
    for api in BOTH {
        let error = failure_of(api, Behavior::RateLimited { retry_after: None }).await;
        assert_eq!(
            (error.kind, error.retry_after),
            (FailureKind::RateLimited, None),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn an_exhausted_quota_is_provider_wide_not_a_rate_limit() {
    let openai = failure_of(Api::OpenAi, Behavior::QuotaExhausted).await;
    assert_eq!(openai.kind, FailureKind::QuotaExhausted);
    assert_eq!(openai.http_status, Some(429));
    assert_eq!(openai.detail, "HTTP 429 insufficient_quota");

    let anthropic = failure_of(Api::Anthropic, Behavior::QuotaExhausted).await;
    assert_eq!(anthropic.kind, FailureKind::QuotaExhausted);
    assert_eq!(anthropic.http_status, Some(402));
    assert_eq!(anthropic.detail, "HTTP 402 billing_error");
}

#[tokio::test]
async fn a_500_is_a_server_error_from_exactly_one_request() {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        fake.set_default(Behavior::Status(500));
        let error = evaluate(api, &fake).await.unwrap_err();
        assert_eq!(
            (error.kind, error.http_status, error.retry_after),
            (FailureKind::ServerError, Some(500), None),
            "{api:?}"
        );
        // Any hidden retry would have happened before `evaluate` returned.
        let calls = fake.calls();
        assert_eq!(calls.len(), 1, "{api:?}");
        assert_eq!((calls[0].status, calls[0].billed), (500, false));
    }
}

#[tokio::test]
async fn timeouts_conflicts_and_gateway_errors_are_server_errors() {
    for api in BOTH {
        for status in [408, 409, 502, 503, 504, 529] {
            let error = failure_of(api, Behavior::Status(status)).await;
            assert_eq!(
                (error.kind, error.http_status),
                (FailureKind::ServerError, Some(status)),
                "{api:?}"
            );
        }
    }
}

#[tokio::test]
async fn an_overloaded_provider_is_a_server_error_that_keeps_its_retry_after() {
    for (api, status) in [(Api::OpenAi, 503), (Api::Anthropic, 529)] {
        let error = failure_of(
            api,
            Behavior::Overloaded {
                retry_after: Some(Duration::from_secs(3)),
            },
        )
        .await;
        assert_eq!(error.kind, FailureKind::ServerError, "{api:?}");
        assert_eq!(error.http_status, Some(status));
        assert_eq!(error.retry_after, Some(Duration::from_secs(3)));
    }
}

#[tokio::test]
async fn a_rejected_key_is_unauthorized() {
    for api in BOTH {
        let error = failure_of(api, Behavior::Unauthorized).await;
        assert_eq!(
            (error.kind, error.http_status),
            (FailureKind::Unauthorized, Some(401)),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn an_unknown_model_is_model_not_found() {
    let openai = failure_of(Api::OpenAi, Behavior::ModelNotFound).await;
    assert_eq!(openai.kind, FailureKind::ModelNotFound);
    assert_eq!(
        openai.detail,
        "HTTP 404 invalid_request_error/model_not_found"
    );
    let anthropic = failure_of(Api::Anthropic, Behavior::ModelNotFound).await;
    assert_eq!(anthropic.kind, FailureKind::ModelNotFound);
    assert_eq!(anthropic.detail, "HTTP 404 not_found_error");
}

#[tokio::test]
async fn a_prompt_over_the_context_window_is_a_context_length_error() {
    for api in BOTH {
        let error = failure_of(api, Behavior::ContextLength).await;
        assert_eq!(
            (error.kind, error.http_status),
            (FailureKind::ContextLength, Some(400)),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn a_safety_rejection_is_a_content_policy_error() {
    for api in BOTH {
        let error = failure_of(api, Behavior::ContentPolicy).await;
        assert_eq!(
            (error.kind, error.http_status),
            (FailureKind::ContentPolicy, Some(400)),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn any_other_bad_request_is_an_invalid_request() {
    for api in BOTH {
        let error = failure_of(api, Behavior::InvalidRequest).await;
        assert_eq!(
            (error.kind, error.http_status),
            (FailureKind::InvalidRequest, Some(400)),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn a_dropped_connection_is_a_connection_reset_after_one_request() {
    for api in BOTH {
        let error = failure_of(api, Behavior::ResetConnection).await;
        assert_eq!(
            (error.kind, error.http_status),
            (FailureKind::ConnectionReset, None),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn a_hanging_provider_times_out_promptly_after_one_request() {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        fake.push(Behavior::Hang);
        let started = Instant::now();
        let error = evaluate_as(api, &fake.url(), "m@e", Duration::from_millis(300))
            .await
            .unwrap_err();
        let elapsed = started.elapsed();
        assert_eq!(error.kind, FailureKind::Timeout, "{api:?}");
        assert!(
            elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(2),
            "{api:?}: took {elapsed:?}"
        );
        assert_eq!(fake.calls().len(), 1);
    }
}

#[tokio::test]
async fn an_answer_slower_than_the_call_timeout_is_a_timeout_and_a_faster_one_arrives() {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        fake.push(Behavior::Classify.after(Duration::from_millis(600)));
        fake.push(Behavior::Classify.after(Duration::from_millis(50)));
        let timeout = Duration::from_millis(300);
        let slow = evaluate_as(api, &fake.url(), "m@e", timeout).await;
        assert_eq!(slow.unwrap_err().kind, FailureKind::Timeout, "{api:?}");
        let fast = evaluate_as(api, &fake.url(), "m@e", timeout).await;
        assert_eq!(fast.unwrap().output, ModelOutput::Json(classify(&ticket())));
    }
}

#[tokio::test]
async fn a_closed_port_is_connect_failed() {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        let url = fake.url();
        fake.shutdown().await;
        let error = evaluate_as(api, &url, "m@e", CALL_TIMEOUT)
            .await
            .unwrap_err();
        assert_eq!(
            (error.kind, error.http_status),
            (FailureKind::ConnectFailed, None),
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn a_200_with_a_broken_body_is_billed_as_not_json() {
    for api in BOTH {
        let reply = reply_to(api, Behavior::MalformedJson).await.unwrap();
        assert!(
            matches!(reply.output, ModelOutput::NotJson { len } if len > 0),
            "{api:?}: {:?}",
            reply.output
        );
        assert_eq!((reply.http_status, reply.usage), (200, Usage::default()));
    }
}

#[tokio::test]
async fn prose_instead_of_json_is_not_json_with_only_its_length_kept() {
    for api in BOTH {
        let output = output_of(api, Behavior::NotJsonContent).await;
        assert!(
            matches!(output, ModelOutput::NotJson { len } if len > 0),
            "{api:?}: {output:?}"
        );
    }
}

#[tokio::test]
async fn a_declined_answer_is_a_refusal() {
    for api in BOTH {
        assert_eq!(
            output_of(api, Behavior::Refusal).await,
            ModelOutput::Refusal,
            "{api:?}"
        );
    }
}

#[tokio::test]
async fn a_content_filter_stop_is_content_filtered_on_openai_and_a_refusal_on_anthropic() {
    assert_eq!(
        output_of(Api::OpenAi, Behavior::ContentFilter).await,
        ModelOutput::ContentFiltered
    );
    assert_eq!(
        output_of(Api::Anthropic, Behavior::ContentFilter).await,
        ModelOutput::Refusal
    );
}

#[tokio::test]
async fn an_answer_cut_at_the_token_limit_is_truncated_and_still_billed() {
    for api in BOTH {
        let reply = reply_to(api, Behavior::Truncated).await.unwrap();
        assert_eq!(reply.output, ModelOutput::Truncated, "{api:?}");
        assert_eq!(reply.usage, fake_usage(api));
    }
}

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
