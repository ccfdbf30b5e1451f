//! The OpenAI and Anthropic adapters against the fake provider over loopback HTTP: every
//! behaviour maps to the reply or failure the outbox expects, with one request per call.
//! The cheaper tiers (prompt caching, flex, batches) are in `providers/tiers.rs`.
//! The rest, by what they test:
//! - `providers/answers.rs`: what a 200 carries: a classification with its usage, answers
//!   out of contract, broken or prose bodies, refusals, filtered and truncated answers.
//! - `providers/failures.rs`: the provider's error answers, each mapped to its failure kind.
//! - `providers/transport.rs`: dropped connections, hangs, slow answers, closed ports.
//! - `providers/requests.rs`: what each adapter sends, and one ledger entry per billed call.

#[path = "providers/tiers.rs"]
mod tiers;

#[path = "providers/answers.rs"]
mod answers;

#[path = "providers/failures.rs"]
mod failures;

#[path = "providers/transport.rs"]
mod transport;

#[path = "providers/requests.rs"]
mod requests;

use std::time::Duration;

use fake_provider::{prefix_tokens, usage_for, Api, Behavior, FakeProvider};
use triage::{
    domain::versions::ModelVersion,
    providers::{
        ticket_text, AnyProvider, EvaluationRequest, ModelOutput, Policy, Prompt, Provider,
        ProviderConfig, ProviderError, ProviderKind, ProviderReply, Tier, Usage,
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
