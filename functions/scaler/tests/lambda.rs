//! The scaler Lambda as Lambda runs it: the real binary, EventBridge scheduled events through
//! the Runtime API emulator, a real PostgreSQL, and the doorbell queues in moto's SQS.

use std::{
    ops::Range,
    sync::Arc,
    time::{Duration, Instant},
};

use aws_sdk_sqs::{
    config::{BehaviorVersion, Credentials, Region},
    Client,
};
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
};

const TIMEOUT: Duration = Duration::from_secs(30);

/// An SQS client on moto, as the test's own view of the queue.
fn sqs(moto: &[(&'static str, String)]) -> Client {
    let get = |name: &str| {
        moto.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
            .unwrap()
    };
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(get("AWS_REGION")))
        .credentials_provider(Credentials::new(
            get("AWS_ACCESS_KEY_ID"),
            get("AWS_SECRET_ACCESS_KEY"),
            None,
            None,
            "test",
        ))
        .endpoint_url(get("AWS_ENDPOINT_URL"))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    Client::from_conf(config)
}

async fn queue(sqs: &Client, name: &str) -> String {
    sqs.create_queue()
        .queue_name(name)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap()
}

async fn doorbells(sqs: &Client, queue_url: &str) -> usize {
    let mut seen = 0;
    loop {
        let received = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(60)
            .send()
            .await
            .unwrap();
        let batch = received.messages.unwrap_or_default().len();
        if batch == 0 {
            return seen;
        }
        seen += batch;
    }
}

async fn add_tickets(pool: &deadpool_postgres::Pool, config: &Config, numbers: Range<u32>) {
    for i in numbers {
        let ticket = NewTicket {
            subject: format!("Zanzibar invoice {i}"),
            message: "Quokka account locked since Tuesday".into(),
        };
        create_ticket(pool, &config.versions, &ticket, Submitter::LOCAL)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn each_tick_starts_workers_for_the_backlog_up_to_the_cap_through_the_queue() {
    let Some(moto) = testkit::moto::aws_env() else {
        return;
    };
    let sqs = sqs(&moto);
    let queue_url = queue(&sqs, "triage-doorbell").await;
    let url = testkit::fresh_database().await;
    let config = Config::local(&url);
    db::migrate(&config.database).await.unwrap();
    let pool = db::pool(&config.database).unwrap();
    let mut env = moto.clone();
    env.extend([
        ("DATABASE_URL", url),
        ("TRIAGE_WORKER_QUEUE_URL", queue_url.clone()),
        ("TRIAGE_MAX_WORKERS", "3".into()),
        // One invocation: 1 call at a time for 10 s at the assumed 2.5 s = 4 jobs.
        ("TRIAGE_CONCURRENCY", "1".into()),
        ("TRIAGE_INVOCATION_SECONDS", "10".into()),
    ]);
    let Container { runtime, function } =
        Container::start(env!("CARGO_BIN_EXE_triage-scaler"), env).await;

    let idle = runtime.invoke(events::scheduled(), TIMEOUT).await;
    assert_eq!(idle.result.expect("the scaler answered")["started"], 0);
    assert_eq!(
        doorbells(&sqs, &queue_url).await,
        0,
        "no backlog, no worker"
    );

    add_tickets(&pool, &config, 0..6).await;
    let small = runtime.invoke(events::scheduled(), TIMEOUT).await;
    let report = small.result.expect("the scaler answered");
    assert_eq!(report["observed"]["claimable"], 6, "{report}");
    assert_eq!(report["started"], 2, "6 jobs at 4 per invocation: {report}");
    assert_eq!(doorbells(&sqs, &queue_url).await, 2);

    add_tickets(&pool, &config, 6..46).await;
    let capped = runtime.invoke(events::scheduled(), TIMEOUT).await;
    assert_eq!(
        capped.result.expect("the scaler answered")["started"],
        3,
        "the cap"
    );
    assert_eq!(doorbells(&sqs, &queue_url).await, 3);

    function
        .stderr()
        .wait_for("worker invocations started")
        .await;
    for line in function.stderr().lines() {
        assert!(
            !line.contains("Zanzibar") && !line.contains("Quokka"),
            "{line}"
        );
    }
    function.print_init_and_size(&runtime).await;
}

#[tokio::test]
async fn each_tick_starts_deliverers_for_waiting_deliveries_up_to_their_cap_on_their_own_queue() {
    let Some(moto) = testkit::moto::aws_env() else {
        return;
    };
    let sqs = sqs(&moto);
    let workers = queue(&sqs, "triage-doorbell-workers").await;
    let deliverers = queue(&sqs, "triage-doorbell-deliverers").await;
    let url = testkit::fresh_database().await;
    let config = Arc::new(Config::local(&url));
    db::migrate(&config.database).await.unwrap();
    let pool = db::pool(&config.database).unwrap();
    let mut env = moto.clone();
    env.extend([
        ("DATABASE_URL", url),
        ("TRIAGE_WORKER_QUEUE_URL", workers.clone()),
        ("TRIAGE_DELIVERER_QUEUE_URL", deliverers.clone()),
        ("TRIAGE_MAX_DELIVERERS", "2".into()),
        // One deliverer per 2 deliveries with room; each endpoint has room for 2.
        ("TRIAGE_DELIVERY_CONCURRENCY", "2".into()),
        ("TRIAGE_DELIVERY_PER_ENDPOINT", "2".into()),
    ]);
    let Container { runtime, function } =
        Container::start(env!("CARGO_BIN_EXE_triage-scaler"), env).await;

    let idle = runtime.invoke(events::scheduled(), TIMEOUT).await;
    let report = idle.result.expect("the scaler answered");
    assert_eq!(report["deliverers"]["started"], 0, "{report}");
    assert_eq!(doorbells(&sqs, &deliverers).await, 0, "nothing waiting");

    // One endpoint, three results: it has room for two at once, so one deliverer serves it.
    let hook = |port: u16| format!("https://127.0.0.1:{port}/hook");
    let delivery = DeliveryPolicy {
        allowed_hosts: vec!["127.0.0.1".to_string()],
        ..DeliveryPolicy::default()
    };
    subscription::create(
        &pool,
        Some(Submitter::LOCAL.owner),
        &hook(9),
        false,
        &delivery,
    )
    .await
    .unwrap()
    .created()
    .unwrap();
    add_tickets(&pool, &config, 0..3).await;
    evaluate_all(&pool, &config).await;
    let one = runtime.invoke(events::scheduled(), TIMEOUT).await;
    let report = one.result.expect("the scaler answered");
    assert_eq!(report["deliverers"]["observed"]["claimable"], 2, "{report}");
    assert_eq!(report["deliverers"]["started"], 1, "{report}");
    assert_eq!(report["started"], 0, "no tickets waiting: {report}");
    assert_eq!(doorbells(&sqs, &deliverers).await, 1);
    assert_eq!(
        doorbells(&sqs, &workers).await,
        0,
        "each fleet its own queue"
    );

    // Three more endpoints and a result for each: the first has room for 2 of its 4, the
    // others 1 each; 5 deliveries with room want 3 deliverers, the cap is 2.
    for port in 10..13 {
        subscription::create(
            &pool,
            Some(Submitter::LOCAL.owner),
            &hook(port),
            false,
            &delivery,
        )
        .await
        .unwrap()
        .created()
        .unwrap();
    }
    add_tickets(&pool, &config, 3..4).await;
    evaluate_all(&pool, &config).await;
    let capped = runtime.invoke(events::scheduled(), TIMEOUT).await;
    let report = capped.result.expect("the scaler answered");
    assert_eq!(
        report["deliverers"]["observed"]["claimable"],
        2 + 3,
        "{report}"
    );
    assert_eq!(report["deliverers"]["started"], 2, "the cap: {report}");
    assert_eq!(doorbells(&sqs, &deliverers).await, 2);

    function
        .stderr()
        .wait_for("deliverer invocations started")
        .await;
    function.print_init_and_size(&runtime).await;
}

/// The rules worker evaluates every waiting ticket: each result announces its deliveries.
async fn evaluate_all(pool: &deadpool_postgres::Pool, config: &Arc<Config>) {
    let provider = AnyProvider::from_config(&config.provider, config.worker.call_timeout).unwrap();
    let worker = Worker::new(pool.clone(), provider, config.clone()).unwrap();
    worker
        .run_invocation(
            Instant::now() + Duration::from_secs(40),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
}
