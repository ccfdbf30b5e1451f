//! 00:00 UTC under work in flight: the real `triage` processes (API, sweeper, two workers) and
//! their own PostgreSQL, all under libfaketime with the clock moved to less than a minute
//! before midnight (a fixed offset, so every process, the server included, agrees), and the
//! fake provider holding the day's one call across the turn. Everything that turns at 00:00
//! UTC reads the day from the database's `now()`, so the server's clock is what the day is.
//!
//! Checked on both sides of midnight: the daily budget (a budget that one call spends: one
//! call per UTC day, the call in flight at midnight counted on the day it started, the new
//! day's spend from zero), the per-caller quota (used up before midnight with a `Retry-After`
//! that ends at midnight, counted from zero after it), the ledger's daily partitions (the day
//! four ahead made, yesterday's dropped by a retention of a day, nothing in the DEFAULT
//! partition), and the agreement windows (a day six days back leaves the 7-day window and stays
//! in the 30-day one; feedback after midnight counts on the new day). `scripts/soak` does the
//! same under load; this is the test that fails when one of them does not turn.
//!
//! libfaketime is Debian's `faketime` package (scripts/test installs it), found at
//! `TRIAGE_LIBFAKETIME` or the package's path; the test fails when it is missing.

use std::{
    path::Path,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use fake_provider::{Behavior, FakeProvider, Gate};
use testkit::OwnServer;
use tokio::process::Child;

mod processes;

const TRIAGE: &str = env!("CARGO_BIN_EXE_triage");
/// How long after the test starts midnight comes: the set-up (the server, migrations, the
/// processes) and the day's first half of the checks fit in it, on a loaded machine too.
const LEAD: Duration = Duration::from_secs(50);
const QUOTA: usize = 3;
/// Less than any call costs: the day's first call crosses it, and nothing else starts.
const BUDGET_USD: &str = "0.000001";

fn libfaketime() -> String {
    let path = std::env::var("TRIAGE_LIBFAKETIME")
        .unwrap_or_else(|_| "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1".into());
    assert!(
        Path::new(&path).exists(),
        "libfaketime not at {path}: install Debian's faketime package (scripts/test does) or set TRIAGE_LIBFAKETIME"
    );
    path
}

/// The moved clock's variables, and the epoch second of the midnight it brings `LEAD` from now.
fn moved_clock() -> (Vec<(&'static str, String)>, i64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let midnight = ((now + LEAD.as_secs() as i64) / 86_400 + 1) * 86_400;
    let offset = midnight - LEAD.as_secs() as i64 - now;
    let env = vec![
        ("LD_PRELOAD", libfaketime()),
        ("FAKETIME", format!("+{offset}s")),
        // Timers and timeouts keep the real monotonic clock.
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
    ];
    (env, midnight)
}

fn spawn(env: &[(&'static str, String)], args: &[&str], log: &str) -> Child {
    processes::spawn(
        Path::new(TRIAGE),
        env,
        args,
        &processes::log_dir("midnight").join(log),
    )
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    db
}

async fn number(db: &tokio_postgres::Client, sql: &str) -> f64 {
    db.query_one(&format!("SELECT ({sql})::float8"), &[])
        .await
        .unwrap()
        .get(0)
}

/// Waits until `sql` (a boolean) holds, up to `secs` seconds.
async fn until(db: &tokio_postgres::Client, sql: &str, secs: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let holds: bool = db
            .query_one(&format!("SELECT ({sql})"), &[])
            .await
            .unwrap()
            .get(0);
        if holds {
            return;
        }
        assert!(Instant::now() < deadline, "after {secs} s: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct Api {
    http: reqwest::Client,
    url: String,
}

impl Api {
    /// POSTs a ticket; answers the status and the `Retry-After` seconds, if any.
    async fn post(&self, n: usize) -> (u16, Option<u64>) {
        let body = serde_json::json!({
            "subject": format!("Midnight {n}"),
            "message": format!("Order {n} was charged twice."),
        });
        let response = self
            .http
            .post(format!("{}/tickets", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse().ok());
        (response.status().as_u16(), retry_after)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_day_turns_at_utc_midnight_with_work_in_flight() {
    let (clock, midnight) = moved_clock();
    let server = OwnServer::start_under("midnight-postgres", &clock);
    let database_url = server.fresh_database().await;
    let db = connect(&database_url).await;
    let fake = FakeProvider::start().await;
    fake.set_strict(true);
    // The day's one call is held until after midnight: in flight across the turn.
    let gate = Gate::new();
    fake.push(Behavior::Classify.held(&gate));

    let mut env = processes::environment(&database_url, &fake.url());
    env.extend(clock);
    for (name, value) in [
        ("TRIAGE_DAILY_BUDGET_USD", BUDGET_USD.to_string()),
        ("TRIAGE_CALLER_DAILY_TICKETS", QUOTA.to_string()),
        ("TRIAGE_RETENTION_SECONDS", "86400".into()),
        ("TRIAGE_CONCURRENCY", "2".into()),
        ("TRIAGE_BATCH_SIZE", "2".into()),
        // The held call outlives the turn; the invocation outlives the call.
        ("TRIAGE_CALL_TIMEOUT_SECONDS", "90".into()),
        ("TRIAGE_INVOCATION_SECONDS", "100".into()),
    ] {
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
    }
    let migrate = spawn(&env, &["migrate"], "migrate.log")
        .wait()
        .await
        .unwrap();
    assert!(migrate.success(), "triage migrate");
    let day = |days: i64| format!("(to_timestamp({midnight}) + interval '{days} day')");
    let name = |days: i64| {
        format!(
            "'provider_call_' || to_char({} AT TIME ZONE 'UTC', 'YYYYMMDD')",
            day(days)
        )
    };
    // A deployment running since yesterday: yesterday's partition, and agreement counted six
    // days before today (inside the 7-day window until midnight).
    let yesterday: String = db
        .query_one(&format!("SELECT {}", name(-2)), &[])
        .await
        .unwrap()
        .get(0);
    db.batch_execute(&format!(
        "CREATE TABLE {yesterday} PARTITION OF provider_call FOR VALUES FROM ({}) TO ({});
         INSERT INTO feedback_agreement_day (day, prompt_version, model_version, n, department_agrees)
         VALUES (({} AT TIME ZONE 'UTC')::date, 'some-prompt', 'some-model', 5, 5)",
        day(-2),
        day(-1),
        day(-7),
    ))
    .await
    .unwrap();

    let listen = processes::free_loopback_address();
    let _api = spawn(&env, &["serve", "--listen", &listen], "serve.log");
    let _sweeper = spawn(&env, &["sweeper"], "sweeper.log");
    let _workers = [
        spawn(&env, &["worker"], "worker-1.log"),
        spawn(&env, &["worker"], "worker-2.log"),
    ];
    let started = Instant::now();
    while tokio::net::TcpStream::connect(&listen).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the API did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let api = Api {
        http: triage::tls::https_client_builder().build().unwrap(),
        url: format!("http://{listen}"),
    };
    let left = midnight as f64 - number(&db, "extract(epoch FROM now())").await;
    assert!(
        left > 10.0,
        "the set-up took too long: {left:.1} s left before midnight (the test needs 10)"
    );

    // Before midnight: the quota used up, with a Retry-After that ends at midnight.
    for n in 0..QUOTA {
        assert_eq!(api.post(n).await.0, 201, "ticket {n} of the day's quota");
    }
    let (status, retry_after) = api.post(QUOTA).await;
    let left = midnight as f64 - number(&db, "extract(epoch FROM now())").await;
    assert_eq!(status, 429, "over the caller's quota");
    let retry_after = retry_after.expect("Retry-After") as f64;
    assert!(
        retry_after > 0.0 && (retry_after - left).abs() <= 2.0,
        "Retry-After {retry_after} s ends at midnight ({left:.1} s away)"
    );
    // The budget: the day's one call is in flight, nothing else starts.
    gate.wait_held(1, Duration::from_secs(15))
        .await
        .expect("the day's first call");
    let week = "SELECT coalesce(sum(n), 0) FROM feedback_agreement_day \
                WHERE day > (now() AT TIME ZONE 'UTC')::date - 7";
    assert_eq!(
        number(&db, week).await,
        5.0,
        "six days back is in the 7-day window"
    );
    let partitions = format!(
        "SELECT count(*) FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid
         WHERE i.inhparent = 'provider_call'::regclass AND c.relname = ANY (ARRAY[{}, {}, {}])",
        name(-2),
        name(-1),
        name(2)
    );
    assert_eq!(
        number(&db, &partitions).await,
        3.0,
        "yesterday's, today's and three days ahead"
    );
    // While the workers keep asking: still one call, the other tickets waiting unattempted.
    until(
        &db,
        &format!(
            "now() >= to_timestamp({midnight}) - interval '3 seconds'
             OR (SELECT count(*) FROM provider_call) > 1"
        ),
        60,
        "midnight's eve",
    )
    .await;
    let left = midnight as f64 - number(&db, "extract(epoch FROM now())").await;
    assert!(left > 0.0, "the checks before midnight ran past it");
    assert_eq!(
        number(&db, "SELECT count(*) FROM provider_call").await,
        1.0,
        "one call a day under a budget that one call spends"
    );
    assert_eq!(
        number(
            &db,
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0"
        )
        .await,
        (QUOTA - 1) as f64,
        "the others wait for the budget, no attempt spent"
    );

    // Midnight.
    until(
        &db,
        &format!("now() >= to_timestamp({midnight})"),
        30,
        "midnight",
    )
    .await;
    // The quota counts from zero.
    for n in 0..QUOTA {
        assert_eq!(
            api.post(100 + n).await.0,
            201,
            "ticket {n} of the new day's quota"
        );
    }
    assert_eq!(api.post(200).await.0, 429, "the new day's quota used up");
    let counts = db
        .query(
            "SELECT tickets FROM caller_daily_tickets WHERE owner = 'local' ORDER BY day",
            &[],
        )
        .await
        .unwrap();
    let counts: Vec<i32> = counts.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        counts,
        [QUOTA as i32, QUOTA as i32],
        "each day counted from zero"
    );
    // The budget is the new day's: one call starts while yesterday's is still in flight.
    until(
        &db,
        &format!("(SELECT count(*) FROM provider_call WHERE started_at >= to_timestamp({midnight})) >= 1"),
        30,
        "the new day's call",
    )
    .await;
    assert_eq!(gate.held(), 1, "yesterday's call is still in flight");
    assert!(
        number(&db, "SELECT spent_usd FROM budget_spend()").await > 0.0,
        "the new day's spend is its own call's"
    );
    gate.release();
    until(
        &db,
        "(SELECT count(*) FROM provider_call WHERE finished_at IS NULL) = 0",
        30,
        "both calls finished",
    )
    .await;
    // Each call on the day it started, in the running totals as in the ledger; and no more.
    let per_day = |from: i64| {
        format!(
            "SELECT (SELECT count(*) FROM provider_call WHERE started_at >= {a} AND started_at < {b}),
                    (SELECT coalesce(sum(cost_usd), 0)::float8 FROM provider_call
                     WHERE started_at >= {a} AND started_at < {b}),
                    (SELECT coalesce(sum(cost_usd), 0)::float8 FROM provider_call_hour
                     WHERE hour >= {a} AND hour < {b})",
            a = day(from),
            b = day(from + 1)
        )
    };
    for (from, which) in [(-1, "the old day"), (0, "the new day")] {
        let row = db.query_one(&per_day(from), &[]).await.unwrap();
        let (calls, ledger, totals): (i64, f64, f64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!(calls, 1, "one call on {which}");
        assert!(
            ledger > 0.0 && (ledger - totals).abs() < 1e-9,
            "{which}: the running totals ({totals}) say what the ledger says ({ledger})"
        );
    }
    let today: f64 = db.query_one(&per_day(0), &[]).await.unwrap().get(1);
    let spent = number(&db, "SELECT spent_usd FROM budget_spend()").await;
    assert!(
        (spent - today).abs() < 1e-9,
        "today's spend ({spent}) is the new day's call alone ({today})"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        number(&db, "SELECT count(*) FROM provider_call").await,
        2.0,
        "nothing more started past the new day's budget"
    );
    assert_eq!(
        number(
            &db,
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'"
        )
        .await,
        0.0
    );

    // The partitions: four days ahead made, yesterday's dropped (retention: a day).
    until(
        &db,
        &format!(
            "EXISTS (SELECT 1 FROM pg_class WHERE relname = {}) AND NOT EXISTS (SELECT 1 FROM pg_class WHERE relname = {})",
            name(3),
            name(-2)
        ),
        30,
        "the sweeper's partitions of the new day",
    )
    .await;
    assert_eq!(
        number(&db, "SELECT count(*) FROM provider_call_default").await,
        0.0,
        "every call in its day's partition"
    );

    // Agreement: six days back has left the 7-day window, not the 30-day one; feedback today
    // counts on the new day.
    assert_eq!(number(&db, week).await, 0.0, "seven days back now");
    let month = week.replace("- 7", "- 30");
    assert_eq!(number(&db, &month).await, 5.0, "still in the 30-day window");
    let result = db
        .query_one(
            "SELECT ticket_id::text, department FROM evaluation_result ORDER BY computed_at DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap();
    let (ticket, department): (String, String) = (result.get(0), result.get(1));
    let feedback = api
        .http
        .post(format!("{}/tickets/{ticket}/feedback", api.url))
        .json(&serde_json::json!({ "department": department, "is_urgent": false }))
        .send()
        .await
        .unwrap();
    assert_eq!(feedback.status().as_u16(), 200, "feedback");
    assert_eq!(
        number(&db, week).await,
        1.0,
        "today's feedback in the 7-day window"
    );
    assert_eq!(
        number(
            &db,
            &format!(
                "SELECT count(*) FROM feedback_match WHERE day = ({} AT TIME ZONE 'UTC')::date",
                day(0)
            )
        )
        .await,
        1.0,
        "counted on the new day"
    );
    drop(server);
}
