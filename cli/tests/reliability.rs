//! The reliability suite (in the spirit of awa's chaos tests and River's rescuer tests): the
//! real `triage` binary as several worker processes, a sweeper and the API, on a PostgreSQL
//! server of the suite's own, against the fake provider over loopback, while tickets keep
//! arriving. Round after round:
//!
//! - faults of the workers: `kill -9` of two of them mid-call, one stopped (SIGSTOP) past its
//!   lease and resumed, provider connection resets;
//! - a crash and restart of PostgreSQL (`pg_ctl stop -m immediate`) with calls in flight.
//!
//! Asserted: no acknowledged ticket is lost, nothing is dead-lettered, the API answers only
//! 201 or 503, billed − unique ≤ the calls in flight at the worker faults and exactly 0 across
//! the database crash (when it was shorter than the lease minus one call, as planned; on a
//! machine loaded enough to stretch it, ≤ its calls in flight), every ticket done at the end. One round by default (CI-sized, well
//! under two minutes); `RELIABILITY_SOAK_SECONDS=600` repeats rounds for ten minutes
//! (`scripts/bench soak`). Each round prints its figures.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use fake_provider::{Behavior, FakeProvider};
use testkit::OwnServer;
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

mod processes;

const TRIAGE: &str = env!("CARGO_BIN_EXE_triage");
/// How long each answer takes: calls are in flight whenever a fault lands.
const ANSWER_DELAY: Duration = Duration::from_millis(300);
const LEASE: Duration = Duration::from_secs(8);
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
const WORKERS: usize = 4;
const CONCURRENCY: i64 = 4;
/// How long PostgreSQL stays down: the answers of the calls in flight arrive meanwhile,
/// and it is shorter than the lease minus one call.
const DATABASE_OUTAGE: Duration = Duration::from_secs(2);

/// The environment every process of the deployment shares.
fn environment(database_url: &str, provider_url: &str) -> Vec<(&'static str, String)> {
    let mut env = processes::environment(database_url, provider_url);
    env.extend([
        ("TRIAGE_CONCURRENCY", CONCURRENCY.to_string()),
        ("TRIAGE_BATCH_SIZE", CONCURRENCY.to_string()),
        (
            "TRIAGE_CALL_TIMEOUT_SECONDS",
            CALL_TIMEOUT.as_secs().to_string(),
        ),
        ("TRIAGE_LEASE_SECONDS", LEASE.as_secs().to_string()),
        ("TRIAGE_BREAKER_COOLDOWN_SECONDS", "0.2".into()),
        ("TRIAGE_DB_CONNECT_TIMEOUT_SECONDS", "1".into()),
    ]);
    env
}

/// A `triage` process, killed when dropped.
fn spawn(env: &[(&'static str, String)], args: &[&str], log: &str) -> Child {
    processes::spawn(
        Path::new(TRIAGE),
        env,
        args,
        &processes::log_dir("reliability").join(log),
    )
}

fn signal(child: &Child, name: &str) {
    let pid = child.id().expect("running").to_string();
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name}");
}

/// POSTs tickets to the API until stopped, keeping every answer.
#[derive(Default)]
struct Ingest {
    /// Status → count.
    statuses: Mutex<BTreeMap<u16, usize>>,
    /// Ticket ids answered with 201.
    acknowledged: Mutex<Vec<String>>,
}

impl Ingest {
    async fn run(self: Arc<Self>, api: String, round: usize, stop: CancellationToken) {
        let http = triage::tls::https_client_builder().build().unwrap();
        let mut n = 0;
        while !stop.is_cancelled() {
            // Every tenth ticket repeats an earlier content: two tickets, one job, one call.
            let content = if n % 10 == 9 { n - 5 } else { n };
            let body = serde_json::json!({
                "subject": format!("Reliability {round}-{content}"),
                "message": "The invoice total is wrong.",
            });
            let (status, id) = match http.post(format!("{api}/tickets")).json(&body).send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body: serde_json::Value = response.json().await.unwrap_or_default();
                    (status, body["id"].as_str().map(String::from))
                }
                // Not an HTTP answer at all (connection refused or reset): recorded as 0.
                Err(_) => (0, None),
            };
            *self.statuses.lock().unwrap().entry(status).or_default() += 1;
            if let (201, Some(id)) = (status, id) {
                self.acknowledged.lock().unwrap().push(id);
            }
            n += 1;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    db
}

struct Suite {
    server: OwnServer,
    fake: FakeProvider,
    database_url: String,
    /// The suite's own session, opened again after the crash.
    db: tokio_postgres::Client,
    env: Vec<(&'static str, String)>,
    api: String,
    workers: Vec<Child>,
    spawned: usize,
    /// Ledger rows of calls whose worker was killed in an earlier phase: never finished.
    orphaned: i64,
    ingest: Arc<Ingest>,
}

impl Suite {
    async fn count(&self, sql: &str) -> i64 {
        testkit::count(&self.db, sql).await
    }

    async fn unfinished_calls(&self) -> i64 {
        self.count("SELECT count(*) FROM provider_call WHERE finished_at IS NULL")
            .await
    }

    /// Calls in flight right now: unfinished in the ledger, and not left so by an earlier kill.
    async fn in_flight(&self) -> i64 {
        self.unfinished_calls().await - self.orphaned
    }

    fn spawn_worker(&mut self) {
        self.spawned += 1;
        let log = format!("worker-{}.log", self.spawned);
        self.workers.push(spawn(&self.env, &["worker"], &log));
    }

    /// Waits until `more` calls beyond those seen so far reached the provider.
    async fn calls_reach(&self, more: usize) {
        let wanted = self.fake.call_count() + more;
        self.fake
            .wait_for_calls(wanted, Duration::from_secs(30))
            .await
            .expect("the workers keep calling");
    }

    /// Extra billed calls so far: paid for a content already paid for.
    fn extra_billed(&self) -> usize {
        let billed = self.fake.billed_count();
        billed - self.fake.billed_by_content().len()
    }

    /// Waits until no job is pending or processing; answers the calls left unfinished by then
    /// (their workers were killed): orphans from now on.
    async fn wait_until_every_job_is_finished(&self) -> i64 {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let open = self
                .count("SELECT count(*) FROM evaluation_outbox WHERE status IN ('pending', 'processing')")
                .await;
            if open == 0 {
                return self.unfinished_calls().await;
            }
            assert!(Instant::now() < until, "{open} jobs still open after 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn ingesting(&self, round: usize) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let stop = CancellationToken::new();
        let task = tokio::spawn(
            self.ingest
                .clone()
                .run(self.api.clone(), round, stop.clone()),
        );
        (stop, task)
    }

    /// Worker faults under ingest; answers the calls in flight at them.
    async fn worker_faults(&mut self, round: usize) -> i64 {
        let (stop, ingest) = self.ingesting(round).await;
        let mut in_flight = 0;

        self.calls_reach(8).await;
        in_flight += self.in_flight().await;
        let mut killed = self.workers.remove(0);
        killed.start_kill().unwrap();
        killed.wait().await.unwrap();

        self.fake.push(Behavior::ResetConnection);
        self.fake.push(Behavior::ResetConnection);

        self.calls_reach(8).await;
        in_flight += self.in_flight().await;
        signal(&self.workers[0], "STOP");
        // Stopped past its lease: the sweeper hands its jobs on meanwhile.
        tokio::time::sleep(LEASE + Duration::from_secs(1)).await;
        signal(&self.workers[0], "CONT");

        self.calls_reach(8).await;
        in_flight += self.in_flight().await;
        let mut killed = self.workers.remove(1);
        killed.start_kill().unwrap();
        killed.wait().await.unwrap();

        while self.workers.len() < WORKERS {
            self.spawn_worker();
        }
        self.calls_reach(8).await;
        stop.cancel();
        ingest.await.unwrap();
        self.orphaned = self.wait_until_every_job_is_finished().await;
        in_flight
    }

    /// A PostgreSQL crash under ingest with calls in flight; answers the calls in flight and
    /// how long the server was away (the planned outage, plus stopping and starting it, which
    /// take seconds on a loaded machine).
    async fn database_crash(&mut self, round: usize) -> (i64, Duration) {
        let phase_at = self.database_now().await;
        let (stop, ingest) = self.ingesting(round + 1000).await;
        self.calls_reach(8).await;
        let crash_at = self.database_now().await;
        let crashed = Instant::now();
        tokio::task::block_in_place(|| self.server.crash());
        tokio::time::sleep(DATABASE_OUTAGE).await;
        tokio::task::block_in_place(|| self.server.restart());
        let outage = crashed.elapsed();
        self.db = connect(&self.database_url).await;
        let back_at = self.database_now().await;
        self.calls_reach(8).await;
        stop.cancel();
        ingest.await.unwrap();
        self.orphaned = self.wait_until_every_job_is_finished().await;
        // No call starts while the server is down (its ledger row comes first): the calls in
        // flight at the crash started before it was back and had not finished when it went.
        let in_flight = self
            .db
            .query_one(
                "SELECT count(*) FROM provider_call WHERE started_at >= $1 AND started_at < $3 \
                 AND (finished_at IS NULL OR finished_at >= $2)",
                &[&phase_at, &crash_at, &back_at],
            )
            .await
            .unwrap()
            .get(0);
        (in_flight, outage)
    }

    /// The server's clock, which the ledger's times are on.
    async fn database_now(&self) -> std::time::SystemTime {
        self.db.query_one("SELECT now()", &[]).await.unwrap().get(0)
    }

    /// The figures every round asserts, printed.
    async fn check(
        &self,
        round: usize,
        extra: (usize, usize),
        in_flight: (i64, i64),
        outage: Duration,
    ) {
        let acknowledged = self.ingest.acknowledged.lock().unwrap().clone();
        let statuses = self.ingest.statuses.lock().unwrap().clone();
        let done = self
            .db
            .query_one(
                "SELECT count(*) FROM ticket t JOIN ticket_evaluation te ON te.ticket_id = t.id \
                 JOIN evaluation_result r USING (idempotency_key) WHERE t.id::text = ANY($1)",
                &[&acknowledged],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        let dead = self
            .count("SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'")
            .await;
        println!(
            "reliability round {round}: acknowledged {} (done with a result {done}), API statuses {statuses:?}, \
             dead letters {dead}, billed {} for {} contents; extra billed {} after worker faults with {} calls \
             in flight at them, {} across a database crash of {:.1} s with {} calls in flight",
            acknowledged.len(),
            self.fake.billed_count(),
            self.fake.billed_by_content().len(),
            extra.0,
            in_flight.0,
            extra.1,
            outage.as_secs_f64(),
            in_flight.1,
        );
        assert_eq!(
            done,
            acknowledged.len() as i64,
            "every acknowledged ticket is done"
        );
        assert_eq!(dead, 0, "nothing dead-lettered");
        assert!(
            statuses.keys().all(|s| [201, 503].contains(s)),
            "only 201 or 503 from the API: {statuses:?}"
        );
        assert!(
            extra.0 as i64 <= in_flight.0,
            "worker faults cost more than their calls in flight"
        );
        assert!(
            in_flight.1 > 0,
            "the crash landed while calls were in flight"
        );
        // A result in hand outlives an outage shorter than the lease minus one call. A loaded
        // machine can stretch the planned outage past that: then at most the calls in flight.
        if outage + CALL_TIMEOUT < LEASE {
            assert_eq!(extra.1, 0, "a database crash costs no extra billed call");
        } else {
            assert!(
                extra.1 as i64 <= in_flight.1,
                "a long outage cost more than its calls in flight"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_stopped_and_a_database_crash_lose_nothing_and_pay_twice_only_for_calls_in_flight(
) {
    let soak = std::env::var("RELIABILITY_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs);
    let server = OwnServer::start("reliability-postgres");
    let database_url = server.fresh_database().await;
    let fake = FakeProvider::start().await;
    fake.set_strict(true);
    fake.set_default(Behavior::Classify.after(ANSWER_DELAY));
    let env = environment(&database_url, &fake.url());
    let migrate = spawn(&env, &["migrate"], "migrate.log")
        .wait()
        .await
        .unwrap();
    assert!(migrate.success(), "triage migrate");
    let db = connect(&database_url).await;

    let listen = processes::free_loopback_address();
    let _api = spawn(&env, &["serve", "--listen", &listen], "serve.log");
    let _sweeper = spawn(&env, &["sweeper"], "sweeper.log");
    let mut suite = Suite {
        server,
        fake,
        database_url,
        db,
        env,
        api: format!("http://{listen}"),
        workers: Vec::new(),
        spawned: 0,
        orphaned: 0,
        ingest: Arc::default(),
    };
    let until = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(&listen).await.is_err() {
        assert!(Instant::now() < until, "the API did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for _ in 0..WORKERS {
        suite.spawn_worker();
    }

    let started = Instant::now();
    let mut round = 0;
    loop {
        round += 1;
        let before = suite.extra_billed();
        let worker_faults = suite.worker_faults(round).await;
        let after_faults = suite.extra_billed();
        let (crash, outage) = suite.database_crash(round).await;
        let after_crash = suite.extra_billed();
        suite
            .check(
                round,
                (after_faults - before, after_crash - after_faults),
                (worker_faults, crash),
                outage,
            )
            .await;
        if soak.is_none_or(|soak| started.elapsed() >= soak) {
            break;
        }
    }
}
