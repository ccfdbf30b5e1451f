//! The scaler Lambda as Lambda runs it: the real binary, EventBridge scheduled events through
//! the Runtime API emulator, a real PostgreSQL, and the doorbell queue in moto's SQS.

use std::{ops::Range, time::Duration};

use aws_sdk_sqs::{
    config::{BehaviorVersion, Credentials, Region},
    Client,
};
use testkit::lambda::{events, Function, RuntimeApi};
use triage::{
    config::Config,
    db,
    pipeline::ingest::{create_ticket, NewTicket},
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
            owner: None,
        };
        create_ticket(pool, &config.versions, &ticket)
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
    let queue_url = sqs
        .create_queue()
        .queue_name("triage-doorbell")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
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
    let runtime = RuntimeApi::start().await;
    let function = Function::spawn(env!("CARGO_BIN_EXE_triage-scaler"), &runtime, env);

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
