//! A provider that refuses the shape of our requests (an unsupported schema keyword, a
//! parameter the model does not take) is a fault of the deployment, not of the tickets: it
//! pauses claiming like an outage and dead-letters nothing.

use std::time::Duration;

use fake_provider::{Behavior, FakeProvider};

use crate::helpers::spawn_app_with_fake;

#[tokio::test]
async fn a_spell_of_request_shape_rejections_dead_letters_nothing_and_the_backlog_drains_after() {
    let fake = FakeProvider::start().await;
    // What strict structured outputs answered some models for numeric constraints.
    fake.set_outage(Some(Behavior::RejectParameter {
        param: "response_format".into(),
        message: "Invalid schema for response_format 'triage': In context=('properties', 'is_urgent'), 'minimum' is not permitted.".into(),
    }));
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let tickets: Vec<_> = (0..30)
        .map(|i| (format!("Shape {i}"), "body".to_string()))
        .collect();
    app.ingest_many(&tickets).await;
    let worker = app.worker();

    let report = app.run_worker_once(&worker).await;

    assert!(report.paused, "{report:?}");
    assert_eq!(
        (report.dead_lettered, report.rescheduled),
        (0, 0),
        "{report:?}"
    );
    let calls = fake.calls().len();
    assert!(
        calls <= app.config.worker.concurrency,
        "only the calls already in flight were made ({calls})"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call WHERE outcome = 'request_rejected' AND error_class = 'provider_wide'")
            .await,
        calls as i64,
        "the ledger names the rejection"
    );
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0"
        )
        .await,
        30,
        "no attempt spent"
    );

    // The deployment is fixed: the backlog drains by itself, nothing in the dead letter state.
    fake.set_outage(None);
    app.drain(&worker, Duration::from_secs(30)).await;
    let counts = app.status_counts().await;
    assert_eq!(counts.get("done"), Some(&30), "{counts:?}");
    assert_eq!(counts.get("dead"), None, "{counts:?}");
}

#[tokio::test]
async fn the_worker_evaluates_against_a_provider_that_refuses_what_the_real_apis_refuse() {
    let fake = FakeProvider::start().await;
    fake.set_strict(true);
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    app.post_ticket("Strict", "body").await;
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!(report.evaluated, 1, "{report:?}: {:?}", fake.calls());
}
