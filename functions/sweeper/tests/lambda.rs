//! The sweeper Lambda as Lambda runs it: the real binary, an EventBridge scheduled event
//! through the Runtime API emulator, a real PostgreSQL (and, for the batch tier, the fake
//! provider over loopback).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use fake_provider::FakeProvider;
use testkit::lambda::{events, Container};
use triage::{
    config::Config,
    db,
    pipeline::ingest::{create_ticket, NewTicket, Submitter},
    pipeline::{
        outbox::{
            claim::{claim, Serves},
            Lanes,
        },
        worker::Worker,
    },
    providers::AnyProvider,
    telemetry::NAMESPACE,
};

const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn scheduled_event_returns_an_expired_lease_to_pending_and_answers_with_the_report() {
    let url = testkit::fresh_database().await;
    let config = Config::local(&url);
    db::migrate(&config.database).await.unwrap();
    let pool = db::pool(&config.database).unwrap();
    let (subject, message) = ("Zanzibar invoice", "Quokka account locked since Tuesday");
    let ticket = NewTicket {
        subject: subject.into(),
        message: message.into(),
    };
    create_ticket(&pool, &config.versions, &ticket, Submitter::LOCAL)
        .await
        .unwrap();
    // A worker that claimed the job and died: its lease (zero long) has run out.
    let client = pool.get().await.unwrap();
    let claimed = claim(
        &client,
        "crashed-worker",
        1,
        Duration::ZERO,
        Serves::RulesOnly,
        Lanes::default(),
    )
    .await
    .unwrap();
    assert_eq!(claimed.len(), 1);
    let Container { runtime, function } = Container::start(
        env!("CARGO_BIN_EXE_triage-sweeper"),
        [("DATABASE_URL", &url)],
    )
    .await;

    let invocation = runtime.invoke(events::scheduled(), TIMEOUT).await;

    let report = invocation.result.expect("the sweeper answered");
    assert_eq!(report["leases_returned"], 1, "{report}");
    assert_eq!(report["leases_dead_lettered"], 0, "{report}");
    assert_eq!(report["health"]["pending"], 1, "{report}");
    assert_eq!(report["health"]["processing"], 0, "{report}");
    let row = client
        .query_one(
            "SELECT status, locked_by, error_class FROM evaluation_outbox",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, &str>(0), "pending");
    assert_eq!(row.get::<_, Option<&str>>(1), None);
    assert_eq!(row.get::<_, Option<&str>>(2), Some("lease_expired"));

    function.stderr().wait_for("expired leases swept").await;
    function.stdout().wait_for("outbox.lease_expired").await;
    function.assert_telemetry(&invocation.request_id, NAMESPACE, &[subject, message]);
    function.print_init_and_size(&runtime).await;
}

#[tokio::test]
async fn with_the_batch_tier_a_tick_collects_the_batch_a_worker_submitted_while_no_worker_runs() {
    let fake = FakeProvider::start().await;
    fake.set_strict(true);
    let api_key = "sk-sweeper-lambda-test";
    let env = vec![
        ("DATABASE_URL", testkit::fresh_database().await),
        ("TRIAGE_PROVIDER", "openai".to_string()),
        ("TRIAGE_PROVIDER_URL", fake.url()),
        ("TRIAGE_PROVIDER_API_KEY", api_key.to_string()),
        ("TRIAGE_BULK_TIER", "batch".to_string()),
        ("TRIAGE_PRICES", "gpt-6-luna=1/0.1/4, batch=0.5".to_string()),
        ("TRIAGE_CALL_TIMEOUT_SECONDS", "5".to_string()),
        ("TRIAGE_INVOCATION_SECONDS", "20".to_string()),
    ];
    let config = Config::from_lookup(testkit::lambda::lookup(&env))
        .expect("the sweeper's environment is valid");
    db::migrate(&config.database).await.unwrap();
    let config = Arc::new(config);
    let pool = db::pool(&config.database).unwrap();
    let (subject, message) = ("Zanzibar invoice", "Quokka account locked since Tuesday");
    for n in 0..2 {
        let ticket = NewTicket {
            subject: format!("{subject} {n}"),
            message: message.into(),
        };
        create_ticket(&pool, &config.versions, &ticket, Submitter::LOCAL)
            .await
            .unwrap();
    }
    let client = pool.get().await.unwrap();
    client
        .execute("UPDATE evaluation_outbox SET lane = 'bulk'", &[])
        .await
        .unwrap();
    // A worker submits the bulk lane as one batch, then no worker runs again.
    let provider = AnyProvider::from_config(&config.provider, config.worker.call_timeout).unwrap();
    let worker = Worker::new(pool.clone(), provider, config.clone()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    assert_eq!(worker.tend_batches(deadline).await.unwrap().submitted, 1);
    drop(worker);
    let Container { runtime, function } =
        Container::start(env!("CARGO_BIN_EXE_triage-sweeper"), env).await;

    let invocation = runtime.invoke(events::scheduled(), TIMEOUT).await;

    let report = invocation.result.expect("the sweeper answered");
    assert_eq!(report["batches"]["collected"], 1, "{report}");
    assert_eq!(report["batches"]["lines_evaluated"], 2, "{report}");
    assert_eq!(report["batches"]["submitted"], 0, "{report}");
    let done: i64 = client
        .query_one(
            "SELECT count(*) FROM evaluation_outbox o JOIN evaluation_result r \
             USING (idempotency_key) WHERE o.status = 'done'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(done, 2);
    assert_eq!(fake.batches().len(), 1, "nothing sent twice");
    assert!(fake.billed_by_content().values().all(|n| *n == 1));
    function
        .stderr()
        .wait_for("batches tended by the sweeper")
        .await;
    function.assert_telemetry(
        &invocation.request_id,
        NAMESPACE,
        &[subject, message, api_key],
    );
}
