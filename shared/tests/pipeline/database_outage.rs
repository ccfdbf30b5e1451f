//! A result in hand survives a database outage: PostgreSQL crashes while calls are in flight
//! and comes back while their answers wait to be written. Each test runs on a server of its
//! own, since a crash would break every other test on the shared one.

use std::time::{Duration, Instant};

use fake_provider::{Behavior, FakeProvider};
use testkit::OwnServer;
use tokio_util::sync::CancellationToken;

use triage::{config::Config, domain::error::Result, pipeline::worker::Report};

use crate::helpers::{spawn_app_at, use_fake, TestApp};

/// How long each answer takes: long enough for the crash to land while calls are in flight.
const ANSWER_DELAY: Duration = Duration::from_millis(800);

/// A server of the test's own, the fake answering after [`ANSWER_DELAY`], and an app with
/// `tickets` distinct tickets waiting.
struct Outage {
    server: OwnServer,
    fake: FakeProvider,
    app: TestApp,
}

impl Outage {
    async fn start(name: &str, tickets: usize, adjust: impl FnOnce(&mut Config)) -> Self {
        let server = OwnServer::start(name);
        let fake = FakeProvider::start().await;
        fake.set_default(Behavior::Classify.after(ANSWER_DELAY));
        let url = fake.url();
        let app = spawn_app_at(server.fresh_database().await, |c| {
            use_fake(c, url);
            adjust(c);
        })
        .await;
        for i in 0..tickets {
            let created = app.post_ticket(&format!("Outage {i}"), "body").await;
            assert_eq!(created.status, 201);
        }
        Self { server, fake, app }
    }

    /// One worker invocation; the server is killed once `in_flight` calls have reached the
    /// provider, kept down for `outage` (the fault itself, not a wait for something), and
    /// started again.
    async fn invocation_with_crash(&self, in_flight: usize, outage: Duration) -> Result<Report> {
        let worker = self.app.worker();
        let deadline = Instant::now() + self.app.config.worker.invocation_budget;
        let stop = CancellationToken::new();
        let crash = async {
            self.fake
                .wait_for_calls(in_flight, Duration::from_secs(10))
                .await
                .expect("the calls reached the provider");
            tokio::task::block_in_place(|| self.server.crash());
            tokio::time::sleep(outage).await;
            tokio::task::block_in_place(|| self.server.restart());
        };
        let (report, ()) = tokio::join!(worker.run_invocation(deadline, &stop), crash);
        report
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_crash_while_calls_are_in_flight_costs_no_extra_billed_call() {
    let outage = Outage::start("outage-postgres-short", 8, |c| {
        c.worker.concurrency = 4;
        c.worker.batch_size = 8;
        c.worker.lease = Duration::from_secs(30);
        c.worker.invocation_budget = Duration::from_secs(20);
    })
    .await;

    // The answers come back while the database is away (outage 2 s > answer 0.8 s).
    let report = outage
        .invocation_with_crash(4, Duration::from_secs(2))
        .await;

    let (fake, app) = (&outage.fake, &outage.app);
    let report = report.expect("the invocation outlives the outage");
    // Every answer in hand is written. A job started ahead of a free call slot (C of them)
    // whose start statement met the crash made no call: it goes back, and the next
    // invocation evaluates it.
    assert_eq!(report.evaluated + report.released, 8, "{report:?}");
    assert!(report.evaluated >= 4, "the calls in flight: {report:?}");
    assert_eq!(
        (report.abandoned, report.dead_lettered),
        (0, 0),
        "{report:?}"
    );
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let billed = fake.billed_by_content();
    assert_eq!(billed.len(), 8, "{billed:?}");
    assert!(billed.values().all(|&n| n == 1), "paid twice: {billed:?}");
    assert_eq!(
        app.count(
            "SELECT count(*) FROM provider_call WHERE outcome = 'ok' AND finished_at IS NOT NULL"
        )
        .await,
        8,
        "the ledger shows every call answered"
    );
    assert_eq!(app.status_counts().await.get("done"), Some(&8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_lease_costs_at_most_the_calls_in_flight_each_in_the_ledger() {
    let outage = Outage::start("outage-postgres-long", 4, |c| {
        c.worker.concurrency = 4;
        c.worker.batch_size = 4;
        c.worker.call_timeout = Duration::from_secs(1);
        c.worker.invocation_budget = Duration::from_secs(3);
        c.worker.lease = Duration::from_secs(4);
    })
    .await;

    let report = outage
        .invocation_with_crash(4, Duration::from_secs(6))
        .await;

    let (fake, app) = (&outage.fake, &outage.app);
    let report = report.expect("the invocation gives up cleanly");
    assert_eq!(report.abandoned, 4, "{report:?}");
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call WHERE outcome = 'in_flight'")
            .await,
        4,
        "each abandoned call is visible in the ledger"
    );
    // A lease running when the server restarted runs again from its start (docs/fencing.md):
    // once that has run out too, the sweeper hands the jobs on, and they are paid again.
    app.wait_until(
        "SELECT count(*) FROM evaluation_outbox WHERE status = 'processing'
           AND locked_until < now() AND pg_postmaster_start_time() + interval '4 seconds' < now()",
        |n| n == 4,
        "the leases ran out, counted from the restart",
    )
    .await;
    let swept = triage::pipeline::sweep::sweep(&app.pool, &app.config)
        .await
        .unwrap();
    assert_eq!(swept.leases.leases_returned, 4, "{:?}", swept.leases);
    // The rest is no outage: a worker whose calls may take longer than the crash phase's
    // 1 s (an answer takes 0.8 s, and a loaded machine timed one out: one more paid call).
    let patient = app.worker_with(|c| c.worker.call_timeout = Duration::from_millis(1900));
    app.drain(&patient, Duration::from_secs(20)).await;
    let billed = fake.billed_calls().len();
    let unique = fake.billed_by_content().len();
    assert_eq!(unique, 4);
    assert!(
        billed - unique <= 4,
        "{billed} billed for {unique} contents"
    );
    assert_eq!(app.status_counts().await.get("done"), Some(&4));
    assert_eq!(app.status_counts().await.get("dead"), None);
}

/// A statement that reads a column as the wrong type is a bug to report, not the database being
/// away: classed as unavailable, the worker would give the job back and try it forever.
#[tokio::test]
async fn a_value_of_the_wrong_type_is_a_bug_not_the_database_away() {
    let app = crate::helpers::spawn_app().await;
    let client = app.pool.get().await.unwrap();
    let row = client.query_one("SELECT 1::int4", &[]).await.unwrap();
    let err = triage::domain::error::Error::from(row.try_get::<_, i64>(0).unwrap_err());
    assert!(!err.is_unavailable(), "{err}");
    let err = client
        .query_one("SELECT $1::int4", &[&"not a number"])
        .await
        .unwrap_err();
    assert!(!triage::domain::error::Error::from(err).is_unavailable());
}
