//! The worker Lambda as Lambda runs it: the real binary, EventBridge scheduled events through
//! the Runtime API emulator, a real PostgreSQL and the fake provider over loopback.

use std::time::Duration;

use fake_provider::{Behavior, FakeProvider, Gate};
use serde_json::{json, Value};
use testkit::lambda::{self, events, Function, Invocation, RuntimeApi};
use triage::{
    config::Config,
    db,
    pipeline::ingest::{create_ticket, NewTicket, Submitter},
    telemetry::NAMESPACE,
};

/// The deadline of each invocation.
const DEADLINE: Duration = Duration::from_secs(30);
const API_KEY: &str = "sk-lambda-test";

/// One execution environment: the function, its Runtime API, and the test's own view of
/// the database (through the function's own configuration, so the versions agree).
struct Container {
    runtime: RuntimeApi,
    function: Function,
    config: Config,
    pool: deadpool_postgres::Pool,
}

fn worker_env(database_url: String, fake: &FakeProvider) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", database_url),
        ("TRIAGE_PROVIDER", "openai".into()),
        ("TRIAGE_PROVIDER_URL", fake.url()),
        ("TRIAGE_PROVIDER_API_KEY", API_KEY.into()),
        ("TRIAGE_LEASE_SECONDS", "60".into()),
        ("TRIAGE_CALL_TIMEOUT_SECONDS", "5".into()),
        // The budget when a local emulator sends a deadline that has already passed.
        ("TRIAGE_INVOCATION_SECONDS", "20".into()),
    ]
}

/// A fresh, migrated database and a worker container pointed at it and at `fake`.
async fn start(fake: &FakeProvider) -> Container {
    start_with(fake, &[]).await
}

/// [`start`], with `extra` added to the worker's environment.
async fn start_with(fake: &FakeProvider, extra: &[(&'static str, &str)]) -> Container {
    let mut env = worker_env(testkit::fresh_database().await, fake);
    env.extend(extra.iter().map(|(name, value)| (*name, value.to_string())));
    let mut config =
        Config::from_lookup(lambda::lookup(&env)).expect("the worker's environment is valid");
    db::migrate(&config.database).await.unwrap();
    // One connection: the test's queries can tell it apart from the function's.
    config.database.pool_size = 1;
    let pool = db::pool(&config.database).unwrap();
    let lambda::Container { runtime, function } =
        lambda::Container::start(env!("CARGO_BIN_EXE_triage-worker"), env).await;
    Container {
        runtime,
        function,
        config,
        pool,
    }
}

impl Container {
    async fn ticket(&self, subject: &str, message: &str) {
        let ticket = NewTicket {
            subject: subject.into(),
            message: message.into(),
        };
        create_ticket(&self.pool, &self.config.versions, &ticket, Submitter::LOCAL)
            .await
            .unwrap();
    }

    async fn scheduled(&self, deadline: Duration) -> Invocation {
        self.runtime.invoke(events::scheduled(), deadline).await
    }

    /// Until `sql` counts `n` (polled; 30 s at most).
    async fn wait_for_count(&self, sql: &str, n: i64) {
        let waited = tokio::time::timeout(Duration::from_secs(30), async {
            while self.count(sql).await != n {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        waited.unwrap_or_else(|_| panic!("never counted {n}: {sql}"));
    }

    async fn text(&self, sql: &str) -> String {
        let client = self.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    async fn count(&self, sql: &str) -> i64 {
        testkit::count(&self.pool.get().await.unwrap(), sql).await
    }

    /// The function's database sessions (the test's own is the one running this query).
    async fn function_backends(&self) -> Vec<i32> {
        let client = self.pool.get().await.unwrap();
        let rows = client
            .query(
                "SELECT pid FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY pid",
                &[],
            )
            .await
            .unwrap();
        rows.iter().map(|row| row.get(0)).collect()
    }
}

fn report(evaluated: u32) -> Value {
    json!({
        "claimed": evaluated, "evaluated": evaluated, "dedup_hits": 0, "rescheduled": 0,
        "released": 0, "dead_lettered": 0, "fenced": 0, "abandoned": 0, "paused": false,
        "database_away": false, "budget_exhausted": false, "provisional": 0
    })
}

#[tokio::test]
async fn scheduled_event_evaluates_pending_tickets_and_bills_each_content_once() {
    let fake = FakeProvider::start().await;
    let container = start(&fake).await;
    container.ticket("Charged twice", "Refund please").await;
    container.ticket("Charged twice", "Refund please").await;
    container
        .ticket("Cannot log in", "Password reset fails")
        .await;

    let invocation = container.scheduled(DEADLINE).await;

    assert_eq!(invocation.result.expect("the worker answered"), report(2));
    assert_eq!(
        container
            .count("SELECT count(*) FROM evaluation_outbox WHERE status = 'done'")
            .await,
        2
    );
    let billed = fake.billed_by_content();
    assert_eq!(billed.len(), 2, "{billed:?}");
    assert!(billed.values().all(|&calls| calls == 1), "{billed:?}");
    container
        .function
        .print_init_and_size(&container.runtime)
        .await;
}

#[tokio::test]
async fn a_doorbell_from_the_scalers_queue_runs_one_bounded_invocation_like_a_tick() {
    let fake = FakeProvider::start().await;
    let container = start(&fake).await;
    container.ticket("Charged twice", "Refund please").await;

    let invocation = container
        .runtime
        .invoke(events::sqs_doorbell(), DEADLINE)
        .await;

    assert_eq!(invocation.result.expect("the worker answered"), report(1));
    assert_eq!(fake.billed_calls().len(), 1);
}

#[tokio::test]
async fn a_call_held_past_the_lease_keeps_its_job_the_lease_renewed_by_the_function() {
    let fake = FakeProvider::start().await;
    let gate = Gate::new();
    fake.push(Behavior::Classify.held(&gate));
    // A deadline far beyond the lease: served, the lease renewed while the call runs.
    let container = start_with(&fake, &[("TRIAGE_LEASE_SECONDS", "2")]).await;
    container.ticket("Invoice", "Wrong amount").await;

    let invocation = container.scheduled(Duration::from_secs(120));
    let meanwhile = async {
        gate.wait_held(1, Duration::from_secs(30))
            .await
            .expect("the call is held");
        let claimed_until = container
            .text("SELECT locked_until::text FROM evaluation_outbox")
            .await;
        // Past the claim's lease, and still held: renewed by the function, so no claimer or
        // sweeper can take the job from it.
        container
            .wait_for_count(
                &format!(
                    "SELECT count(*) FROM evaluation_outbox WHERE status = 'processing'
                   AND now() > '{claimed_until}'::timestamptz + interval '1 second'
                   AND locked_until > now()"
                ),
                1,
            )
            .await;
        gate.release();
    };
    let (served, ()) = tokio::join!(invocation, meanwhile);
    assert_eq!(served.result.expect("the worker answered"), report(1));
    assert_eq!(fake.billed_calls().len(), 1);
}

#[tokio::test]
async fn a_deadline_too_short_for_one_call_is_a_config_error_naming_the_call_timeout_with_a_metric()
{
    let fake = FakeProvider::start().await;
    let container = start(&fake).await;
    container.ticket("Invoice", "Wrong amount").await;

    // One call may take 5 s plus its write: a function timeout of 3 s cannot fit it.
    let refused = container.scheduled(Duration::from_secs(3)).await;

    let error = refused
        .result
        .expect_err("no call fits: refused, not an empty success");
    assert_eq!(error.error_type, "Config", "{error:?}");
    assert!(
        error.error_message.contains("TRIAGE_CALL_TIMEOUT_SECONDS")
            && error.error_message.contains("function timeout"),
        "{error:?}"
    );
    container
        .function
        .stdout()
        .wait_for("worker.invocation_refused")
        .await;
    assert_eq!(fake.calls().len(), 0);
}

#[tokio::test]
async fn a_deadline_already_past_at_the_start_falls_back_to_the_invocation_budget() {
    let fake = FakeProvider::start().await;
    let container = start(&fake).await;
    container.ticket("Invoice", "Wrong amount").await;

    // What cargo-lambda's emulator sends: 600000 ms after the epoch.
    let invocation = container
        .runtime
        .invoke_with_deadline_ms(events::scheduled(), 600_000, DEADLINE)
        .await;

    assert_eq!(invocation.result.expect("the worker answered"), report(1));
    container
        .function
        .stderr()
        .wait_for("deadline has already passed")
        .await;
}

#[tokio::test]
async fn an_unreachable_database_is_reported_as_unavailable() {
    let fake = FakeProvider::start().await;
    // A local (plain TCP) server that is down.
    let unreachable = "postgres://triage@127.0.0.1:1/nowhere?sslmode=disable";
    let mut env = worker_env(unreachable.into(), &fake);
    env.push(("TRIAGE_DB_CONNECT_TIMEOUT_SECONDS", "0.5".into()));
    let lambda::Container {
        runtime,
        function: _function,
    } = lambda::Container::start(env!("CARGO_BIN_EXE_triage-worker"), env).await;

    let invocation = runtime.invoke(events::scheduled(), DEADLINE).await;

    let error = invocation.result.expect_err("no database, no work");
    assert_eq!(error.error_type, "Unavailable", "{error:?}");
}

#[tokio::test]
async fn the_database_pool_and_provider_client_are_built_once_per_container() {
    let fake = FakeProvider::start().await;
    let container = start(&fake).await;
    let mut backends = Vec::new();
    for (subject, message) in [("First", "one"), ("Second", "two")] {
        container.ticket(subject, message).await;
        let invocation = container.scheduled(DEADLINE).await;
        invocation.result.expect("the worker answered");
        backends.push(container.function_backends().await);
    }

    // The sessions opened by the first invocation served the second one.
    assert!(!backends[0].is_empty());
    assert!(
        backends[0].iter().all(|pid| backends[1].contains(pid)),
        "{backends:?}"
    );
    // One worker (which owns the provider client) made both calls.
    assert_eq!(
        container
            .count("SELECT count(DISTINCT worker) FROM provider_call")
            .await,
        1
    );
    assert_eq!(fake.billed_calls().len(), 2);
}

#[tokio::test]
async fn logs_and_metrics_carry_the_request_id_and_never_the_ticket_text() {
    let fake = FakeProvider::start().await;
    let container = start(&fake).await;
    let (subject, message) = ("Zanzibar invoice", "Quokka account locked since Tuesday");
    container.ticket(subject, message).await;

    let invocation = container.scheduled(DEADLINE).await;
    invocation.result.expect("the worker answered");

    let function = &container.function;
    // The invocation's last log line, and a metric it counted.
    function
        .stderr()
        .wait_for("worker invocation finished")
        .await;
    function.stdout().wait_for("outbox.evaluated").await;
    function.assert_telemetry(
        &invocation.request_id,
        NAMESPACE,
        &[subject, message, API_KEY],
    );
}

#[tokio::test]
async fn at_the_daily_budget_the_worker_claims_nothing_more_and_says_so() {
    let fake = FakeProvider::start().await;
    // One cent a call (20 output tokens at $500 per million), two cents a day.
    let budget = [
        ("TRIAGE_PRICES", "gpt-6-luna=0/500"),
        ("TRIAGE_DAILY_BUDGET_USD", "0.02"),
    ];
    let container = start_with(&fake, &budget).await;
    for i in 0..6 {
        container.ticket(&format!("Ticket {i}"), "body").await;
    }
    let mut last = Value::Null;
    for _ in 0..5 {
        last = container
            .scheduled(DEADLINE)
            .await
            .result
            .expect("answered");
        if last["budget_exhausted"] == true {
            break;
        }
    }
    assert_eq!(last["budget_exhausted"], true, "{last}");
    let calls = fake.billed_calls().len() as i64;
    assert!(
        (2..=3).contains(&calls),
        "{calls} calls for a 2-call budget"
    );
    let waiting =
        "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0";
    assert_eq!(container.count(waiting).await, 6 - calls);
    container
        .function
        .stdout()
        .wait_for("budget.exhausted")
        .await;
}
