//! The provider's error answers, each mapped to the failure the outbox expects: rate limits,
//! quota, server errors, keys, models, context length, safety and bad requests.

use std::time::Duration;

use fake_provider::{Api, Behavior, FakeProvider};
use triage::providers::FailureKind;

use super::{evaluate, failure_of, BOTH};

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
