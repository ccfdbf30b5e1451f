//! The cheaper tiers against the fake provider over loopback: prompt caching (cached input
//! reported and priced), OpenAI's flex tier, and both batch APIs (submitted with our reference,
//! polled, results read, partially failed, expired and cancelled lines), with the fake in
//! strict mode so the bodies are the ones the real APIs accept.

use std::time::{Duration, Instant};

use fake_provider::{classify, prefix_tokens, usage_for, Api, Behavior, FakeProvider, Flex};
use triage::{
    domain::versions::ModelVersion,
    providers::{
        ticket_text, Batch, BatchClient, BatchRequest, BatchState, ErrorClass, EvaluationRequest,
        FailureKind, LineOutcome, ModelOutput, Policy, PriceTable, Prompt, Provider, ProviderError,
        ProviderReply, Tier,
    },
};

use super::{config, policy, provider, BOTH, CALL_TIMEOUT};

const WAIT: Duration = Duration::from_secs(5);

/// One call about `subject` under prompt `version` on `tier`.
async fn call(
    api: Api,
    fake: &FakeProvider,
    version: &str,
    subject: &str,
    tier: Tier,
) -> Result<ProviderReply, ProviderError> {
    let (policy, model) = (policy(), model());
    let prompt = Prompt::load(version, &policy).unwrap();
    let request = request(subject, &prompt, &model, &policy);
    provider(api, &fake.url())
        .evaluate(EvaluationRequest { tier, ..request })
        .await
}

fn model() -> ModelVersion {
    ModelVersion::from_stored("gpt-6-luna@medium")
}

/// An online request about `subject`.
fn request<'a>(
    subject: &'a str,
    prompt: &'a Prompt,
    model: &'a ModelVersion,
    policy: &'a Policy,
) -> EvaluationRequest<'a> {
    EvaluationRequest {
        subject,
        message: "the message",
        prompt,
        model,
        policy,
        timeout: CALL_TIMEOUT,
        tier: Tier::Online,
    }
}

fn prompt_tokens(version: &str) -> i64 {
    prefix_tokens(&Prompt::load(version, &policy()).unwrap().text)
}

#[tokio::test]
async fn a_repeated_prompt_prefix_is_reported_as_cached_input_and_priced_as_such() {
    let prices = PriceTable::parse("gpt-6-luna=1/0.1/4").unwrap();
    for api in BOTH {
        let fake = FakeProvider::start().await;
        let first = call(api, &fake, "triage-v3", "first", Tier::Online)
            .await
            .unwrap();
        let second = call(api, &fake, "triage-v3", "second", Tier::Online)
            .await
            .unwrap();
        let other_prompt = call(api, &fake, "triage-v4", "third", Tier::Online)
            .await
            .unwrap();
        let prefix = prompt_tokens("triage-v3");
        let ticket = usage_for(&ticket_text("second", "the message")).input_tokens;
        assert_eq!(
            second.usage.input_tokens,
            prefix + ticket,
            "{api:?}: all input counted"
        );
        assert_eq!(
            (
                first.usage.cached_input_tokens,
                second.usage.cached_input_tokens
            ),
            (0, prefix),
            "{api:?}"
        );
        assert_eq!(
            other_prompt.usage.cached_input_tokens, 0,
            "{api:?}: another prefix"
        );
        // Anthropic bills the first sight of a cache_control prefix as a cache write.
        let written = if api == Api::Anthropic { prefix } else { 0 };
        assert_eq!(
            (
                first.usage.cache_write_tokens,
                second.usage.cache_write_tokens
            ),
            (written, 0),
            "{api:?}"
        );
        let expected = (ticket as f64 + prefix as f64 * 0.1 + 20.0 * 4.0) / 1e6;
        let cost = prices.cost("gpt-6-luna", second.usage, Tier::Online);
        assert!(
            (cost - expected).abs() < 1e-12,
            "{api:?}: {cost} != {expected}"
        );
        assert!(cost < prices.cost("gpt-6-luna", first.usage, Tier::Online));
    }
}

#[tokio::test]
async fn a_flex_call_asks_for_flex_and_its_resource_unavailable_429_is_a_rate_limit() {
    let fake = FakeProvider::start().await;
    fake.set_strict(true);
    let delay = Duration::from_millis(100);
    fake.set_flex(Flex {
        delay,
        unavailable_every: 2,
    });
    let started = Instant::now();
    let answered = call(Api::OpenAi, &fake, "triage-v3", "flex", Tier::Flex)
        .await
        .unwrap_or_else(|e| panic!("the strict fake refused a flex call: {e}"));
    assert!(started.elapsed() >= delay, "flex answers are slower");
    assert_eq!(
        answered.output,
        ModelOutput::Json(classify(&ticket_text("flex", "the message")))
    );
    let refused = call(Api::OpenAi, &fake, "triage-v3", "flex", Tier::Flex)
        .await
        .unwrap_err();
    assert_eq!(
        (refused.kind, refused.http_status),
        (FailureKind::RateLimited, Some(429))
    );
    // Released without spending an attempt, like any 429.
    assert_eq!(refused.kind.class(), ErrorClass::RateLimit);
    call(Api::OpenAi, &fake, "triage-v3", "online", Tier::Online)
        .await
        .unwrap();
    let tiers: Vec<_> = fake
        .calls()
        .iter()
        .map(|c| c.body.get("service_tier").cloned())
        .collect();
    assert_eq!(tiers, [Some("flex".into()), Some("flex".into()), None]);
}

fn batch_client(api: Api, fake: &FakeProvider) -> BatchClient {
    BatchClient::from_config(&config(api, &fake.url()), CALL_TIMEOUT)
        .unwrap()
        .expect("both APIs have batches")
}

/// Submits one line per subject, custom ids `{reference}-{n}`.
async fn submit(client: &BatchClient, reference: &str, subjects: &[&str]) -> Batch {
    try_submit(client, reference, subjects)
        .await
        .unwrap_or_else(|e| panic!("the strict fake refused our batch: {e}"))
}

async fn try_submit(
    client: &BatchClient,
    reference: &str,
    subjects: &[&str],
) -> Result<Batch, triage::providers::ProviderError> {
    let policy = policy();
    let prompt = Prompt::load("triage-v3", &policy).unwrap();
    let model = model();
    let ids: Vec<String> = (0..subjects.len())
        .map(|n| format!("{reference}-{n}"))
        .collect();
    let lines: Vec<BatchRequest> = subjects
        .iter()
        .zip(&ids)
        .map(|(subject, custom_id)| BatchRequest {
            custom_id,
            request: request(subject, &prompt, &model, &policy),
        })
        .collect();
    client.submit(reference, &lines).await
}

/// Polls until the batch has ended (a condition awaited, bounded by `WAIT`).
async fn ended(client: &BatchClient, id: &str) -> Batch {
    let give_up = Instant::now() + WAIT;
    loop {
        let batch = client.retrieve(id).await.unwrap();
        if batch.state == BatchState::Ended {
            return batch;
        }
        assert!(Instant::now() < give_up, "batch {id} never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_batch_carries_our_reference_and_ends_with_answers_failures_and_expired_lines() {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        fake.set_strict(true);
        fake.set_batch_delay(Duration::from_millis(200));
        fake.when_contains("unsafe", Behavior::ContentPolicy);
        fake.when_contains("never", Behavior::Hang);
        let client = batch_client(api, &fake);
        let batch = submit(&client, "sub-42", &["refund", "unsafe", "never"]).await;
        assert_eq!(
            batch.state,
            BatchState::Running,
            "{api:?}: not before its delay"
        );
        let sent = &fake.batches()[0];
        assert_eq!(
            sent.custom_ids,
            ["sub-42-0", "sub-42-1", "sub-42-2"],
            "{api:?}"
        );
        if api == Api::OpenAi {
            // The reference travels in the batch's metadata and the input file's name.
            assert_eq!(batch.reference.as_deref(), Some("sub-42"));
            assert_eq!(sent.metadata["triage_submission"], "sub-42");
            assert_eq!(sent.input_filename.as_deref(), Some("sub-42.jsonl"));
        }
        let listed = client.list(None, 10).await.unwrap();
        assert_eq!(
            listed.iter().map(|b| &b.id).collect::<Vec<_>>(),
            [&batch.id],
            "{api:?}"
        );
        assert_eq!(listed[0].reference, batch.reference);

        let done = ended(&client, &batch.id).await;
        let mut lines = client.results(&done).await.unwrap();
        lines.sort_by(|a, b| a.custom_id.cmp(&b.custom_id));
        assert_eq!(lines.len(), 3, "{api:?}");
        let LineOutcome::Answered(reply) = &lines[0].outcome else {
            panic!("{api:?}: {:?}", lines[0].outcome);
        };
        let text = ticket_text("refund", "the message");
        assert_eq!(reply.output, ModelOutput::Json(classify(&text)), "{api:?}");
        assert_eq!(
            reply.usage.input_tokens,
            usage_for(&text).input_tokens + prompt_tokens("triage-v3"),
            "{api:?}"
        );
        match &lines[1].outcome {
            LineOutcome::Failed(error) => assert_eq!(error.kind, FailureKind::ContentPolicy),
            other => panic!("{api:?}: {other:?}"),
        }
        assert_eq!(lines[2].outcome, LineOutcome::NotRun, "{api:?}: expired");
        // Only the answered line is billed, once, as a line of this batch.
        let billed = fake.billed_calls();
        assert_eq!(billed.len(), 1, "{api:?}");
        assert_eq!(billed[0].batch.as_deref(), Some(batch.id.as_str()));
        assert_eq!(fake.billed_by_content().get(&text), Some(&1));
    }
}

#[tokio::test]
async fn a_cancelled_batch_ends_with_every_line_not_run_and_nothing_billed() {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        fake.set_strict(true);
        fake.set_batch_delay(Duration::from_secs(3600));
        let client = batch_client(api, &fake);
        let batch = submit(&client, "sub-7", &["one", "two"]).await;
        client.cancel(&batch.id).await.unwrap();
        let done = ended(&client, &batch.id).await;
        let lines = client.results(&done).await.unwrap();
        assert_eq!(lines.len(), 2, "{api:?}");
        assert!(
            lines.iter().all(|l| l.outcome == LineOutcome::NotRun),
            "{api:?}: {lines:?}"
        );
        assert!(fake.billed_calls().is_empty(), "{api:?}");
        assert!(fake.batches()[0].cancelled);
    }
}

#[tokio::test]
async fn deleting_an_ended_batch_leaves_the_provider_no_copy_of_its_text_and_a_refused_one_leaves_no_file(
) {
    for api in BOTH {
        let fake = FakeProvider::start().await;
        fake.set_strict(true);
        let client = batch_client(api, &fake);
        let batch = submit(&client, "ref-kept", &["kept subject"]).await;
        let batch = ended(&client, &batch.id).await;
        assert!(!fake.holding("kept subject").is_empty(), "{api:?}");
        client.delete(&batch).await.unwrap();
        assert_eq!(
            fake.holding("kept subject"),
            Vec::<String>::new(),
            "{api:?}"
        );
        // Gone already counts as deleted: a deletion cut short is done again.
        client.delete(&batch).await.unwrap();
    }
    // OpenAI's batch over an uploaded file is refused (metadata values are at most 512
    // characters): the file, which no batch will ever name, is deleted at once.
    let fake = FakeProvider::start().await;
    fake.set_strict(true);
    let client = batch_client(Api::OpenAi, &fake);
    let error = try_submit(&client, &"r".repeat(600), &["refused subject"])
        .await
        .unwrap_err();
    assert_eq!(error.http_status, Some(400));
    assert!(fake.batches().is_empty());
    assert_eq!(fake.holding("refused subject"), Vec::<String>::new());
}

#[tokio::test]
async fn an_unknown_batch_is_an_error_and_the_offline_classifier_has_no_batches() {
    let fake = FakeProvider::start().await;
    for api in BOTH {
        let error = batch_client(api, &fake)
            .retrieve("batch_404")
            .await
            .unwrap_err();
        assert_eq!(error.http_status, Some(404), "{api:?}");
    }
    let mut rules = config(Api::OpenAi, &fake.url());
    rules.kind = triage::providers::ProviderKind::Rules;
    assert!(BatchClient::from_config(&rules, CALL_TIMEOUT)
        .unwrap()
        .is_none());
}
