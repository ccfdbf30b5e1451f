//! The deliverer Lambda as Lambda runs it: the real binary, a doorbell from the scaler's queue
//! (an SQS event) through the Runtime API emulator, a real PostgreSQL and a webhook receiver
//! over loopback.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{extract::State, http::HeaderMap, routing::post, Router};
use testkit::lambda::{events, Container};
use tokio_util::sync::CancellationToken;
use triage::{
    config::{Config, DeliveryPolicy},
    db,
    pipeline::{
        delivery::subscription,
        ingest::{create_ticket, NewTicket, Submitter},
        worker::Worker,
    },
    providers::AnyProvider,
    telemetry::NAMESPACE,
};

const TIMEOUT: Duration = Duration::from_secs(30);

/// A receiver that acknowledges every webhook and keeps its `webhook-id`.
async fn receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let ids = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route(
            "/hook",
            post(
                |State(ids): State<Arc<Mutex<Vec<String>>>>, headers: HeaderMap| async move {
                    let id = headers["webhook-id"].to_str().unwrap().to_string();
                    ids.lock().unwrap().push(id);
                    axum::http::StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state(ids.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, ids)
}

#[tokio::test]
async fn a_doorbell_from_the_scalers_queue_runs_one_deliverer_invocation_like_a_tick() {
    let url = testkit::fresh_database().await;
    let config = Arc::new(Config::local(&url));
    db::migrate(&config.database).await.unwrap();
    let pool = db::pool(&config.database).unwrap();
    let (hook, received) = receiver().await;
    let delivery = DeliveryPolicy {
        allowed_hosts: vec!["127.0.0.1".to_string()],
        ..DeliveryPolicy::default()
    };
    subscription::create(&pool, Some(Submitter::LOCAL.owner), &hook, false, &delivery)
        .await
        .unwrap()
        .created()
        .unwrap();
    let (subject, message) = ("Zanzibar invoice", "Quokka account locked since Tuesday");
    let ticket = NewTicket {
        subject: subject.into(),
        message: message.into(),
    };
    create_ticket(&pool, &config.versions, &ticket, Submitter::LOCAL)
        .await
        .unwrap();
    // The rules worker stores the result, which announces one delivery.
    let provider = AnyProvider::from_config(&config.provider, config.worker.call_timeout).unwrap();
    Worker::new(pool.clone(), provider, config.clone())
        .unwrap()
        .run_invocation(
            Instant::now() + Duration::from_secs(40),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let Container { runtime, function } = Container::start(
        env!("CARGO_BIN_EXE_triage-deliverer"),
        [
            ("DATABASE_URL", url.as_str()),
            ("TRIAGE_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1"),
            // The budget when the emulator's deadline has already passed.
            ("TRIAGE_INVOCATION_SECONDS", "20"),
        ],
    )
    .await;

    let invocation = runtime.invoke(events::sqs_doorbell(), TIMEOUT).await;

    let report = invocation.result.expect("the deliverer answered");
    assert_eq!(report["claimed"], 1, "{report}");
    assert_eq!(report["delivered"], 1, "{report}");
    assert_eq!(received.lock().unwrap().len(), 1);
    let status: String = pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT status FROM delivery", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "done");

    function
        .stdout()
        .wait_for("delivery.oldest_undelivered_age_seconds")
        .await;
    function.assert_telemetry(&invocation.request_id, NAMESPACE, &[subject, message]);
    function.print_init_and_size(&runtime).await;
}
