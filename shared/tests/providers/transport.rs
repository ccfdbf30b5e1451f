//! The connection: a dropped one, a hanging provider, an answer slower than the call timeout,
//! a closed port.

use std::time::{Duration, Instant};

use fake_provider::{classify, Behavior, FakeProvider};
use triage::providers::{FailureKind, ModelOutput};

use super::{evaluate_as, failure_of, ticket, BOTH, CALL_TIMEOUT};

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
