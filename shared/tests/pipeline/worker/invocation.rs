//! An invocation's bounds: too short for one call, and a batch of one draining the queue
//! within it. (A lease shorter than the invocation is renewed: `leases`.)

use std::time::{Duration, Instant};

use fake_provider::FakeProvider;
use tokio_util::sync::CancellationToken;

use crate::helpers::spawn_app_with_fake;

use super::post;

#[tokio::test]
async fn an_invocation_too_short_for_one_call_is_an_error_naming_the_call_timeout() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Late").await;
    // 1.5 s left, but a call may take 2 s plus its write: a Lambda timeout set too short.
    let deadline = Instant::now() + Duration::from_millis(1500);
    let error = app
        .worker()
        .run_invocation(deadline, &CancellationToken::new())
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("TRIAGE_CALL_TIMEOUT_SECONDS"), "{message}");
    assert!(message.contains("function timeout"), "{message}");
    assert!(fake.calls().is_empty());
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'pending'")
            .await,
        1,
        "nothing was claimed"
    );
}

#[tokio::test]
async fn a_batch_size_of_one_drains_the_queue_within_one_invocation() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |c| c.worker.batch_size = 1).await;
    for subject in ["One", "Two", "Three"] {
        post(&app, subject).await;
    }
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!((report.claimed, report.evaluated), (3, 3), "{report:?}");
}
