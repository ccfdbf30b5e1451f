//! What an answer carries: a classification with its billed usage, an exact answer passed
//! through, one out of contract returned for the contract to reject; a broken body, prose,
//! a refusal, a content filter and a cut at the token limit.

use fake_provider::{classify, Api, Behavior};
use serde_json::json;
use triage::providers::{contract, ModelOutput, ProviderReply, Usage};

use super::{fake_usage, output_of, policy, reply_to, ticket, BOTH};

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
