//! The ledger partitioned by day (migration V14, docs/ledger.md): days created ahead, a DEFAULT
//! partition for a day nobody created, retention by whole days, the running totals intact.

use std::time::Duration;

use triage::{
    pipeline::ledger::{self, Start},
    providers::Tier,
};

use crate::helpers::{budget::spent_today, spawn_app, TestApp};

/// A finished call of `cost` for a fresh job, started `at` (SQL), and the partition it is in.
async fn call_at(app: &TestApp, subject: &str, at: &str, cost: f64) -> String {
    let job = app.claimed(subject).await;
    let client = app.pool.get().await.unwrap();
    let Start::Call { call, .. } =
        ledger::start_call(&client, &job, ("w", "openai"), cost, None, Tier::Online)
            .await
            .unwrap()
    else {
        panic!("no call started");
    };
    let row = client
        .query_one(
            &format!(
                "UPDATE provider_call SET started_at = {at}, finished_at = now(), outcome = 'ok', \
                 billed = true WHERE id = $1 RETURNING tableoid::regclass::text"
            ),
            &[&call.id],
        )
        .await
        .unwrap();
    row.get(0)
}

async fn partitions(app: &TestApp) -> Vec<String> {
    let client = app.pool.get().await.unwrap();
    client
        .query(
            "SELECT inhrelid::regclass::text FROM pg_inherits \
             WHERE inhparent = 'provider_call'::regclass ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

async fn total_calls(app: &TestApp) -> i64 {
    app.count("SELECT coalesce(sum(calls), 0)::bigint FROM provider_call_hour")
        .await
}

#[tokio::test]
async fn calls_at_the_day_boundary_land_in_their_own_day_s_partition() {
    let app = spawn_app().await;
    let tomorrow = "date_trunc('day', now(), 'UTC') + interval '1 day'";
    let day = |offset: i64| {
        (chrono::Utc::now() + chrono::Duration::days(offset))
            .format("provider_call_%Y%m%d")
            .to_string()
    };
    let before = call_at(
        &app,
        "Last",
        &format!("{tomorrow} - interval '1 microsecond'"),
        0.1,
    )
    .await;
    let after = call_at(&app, "First", tomorrow, 0.2).await;
    assert_eq!((before, after), (day(0), day(1)));
    let first_hour: f64 = app
        .row(&format!(
            "SELECT sum(cost_usd)::float8 FROM provider_call_hour WHERE hour = {tomorrow}"
        ))
        .await
        .get(0);
    assert_eq!(first_hour, 0.2, "counted in its own day's first hour");
    // Each call moved hours as it finished (`call_at`): its share left the hour it started in.
    let row = app
        .row("SELECT sum(calls)::bigint, sum(ok)::bigint, sum(billing_unknown)::bigint, \
              sum(cost_usd)::float8, count(*) FILTER (WHERE calls <> 0)::bigint FROM provider_call_hour")
        .await;
    let totals: (i64, i64, i64, f64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    assert_eq!(totals, (2, 2, 0, 0.3, 2));
}

#[tokio::test]
async fn a_day_nobody_created_ahead_keeps_its_calls_and_they_move_in_when_it_is_created() {
    let app = spawn_app().await;
    let far = "date_trunc('day', now(), 'UTC') + interval '10 days' + interval '1 hour'";
    assert_eq!(
        call_at(&app, "Far ahead", far, 0.3).await,
        "provider_call_default"
    );
    let client = app.pool.get().await.unwrap();
    ledger::maintain_partitions(&client, 10, None)
        .await
        .unwrap();
    let moved: String = app
        .row("SELECT tableoid::regclass::text FROM provider_call")
        .await
        .get(0);
    let day = (chrono::Utc::now() + chrono::Duration::days(10)).format("provider_call_%Y%m%d");
    assert_eq!(moved, day.to_string());
    assert_eq!(total_calls(&app).await, 1, "moved in, counted once");
    let cost: f64 = app
        .row("SELECT sum(cost_usd)::float8 FROM provider_call_hour")
        .await
        .get(0);
    assert_eq!(cost, 0.3);
}

#[tokio::test]
async fn retention_drops_whole_old_days_and_keeps_results_and_today_s_spend() {
    let app = spawn_app().await;
    // An old day as a partition of its own, as the sweeper would have created it then.
    app.exec(
        "CREATE TABLE provider_call_old PARTITION OF provider_call FOR VALUES \
         FROM (date_trunc('day', now(), 'UTC') - interval '30 days') \
         TO (date_trunc('day', now(), 'UTC') - interval '29 days')",
    )
    .await;
    let old = "date_trunc('day', now(), 'UTC') - interval '30 days' + interval '1 hour'";
    assert_eq!(call_at(&app, "Old", old, 0.4).await, "provider_call_old");
    // An old call the DEFAULT partition caught (no day existed for it).
    let older = "now() - interval '40 days'";
    assert_eq!(
        call_at(&app, "Older", older, 0.5).await,
        "provider_call_default"
    );
    call_at(&app, "Today", "now()", 0.25).await;
    // The old jobs' results: what dedup reads.
    app.exec(
        "INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department, \
         urgency_score, model_version, prompt_version, policy_version) \
         SELECT c.idempotency_key, (SELECT id FROM ticket LIMIT 1), 0, 'billing', 0, \
         c.model_version, c.prompt_version, 'p' FROM provider_call c",
    )
    .await;

    let client = app.pool.get().await.unwrap();
    let dropped = ledger::maintain_partitions(&client, 1, Some(Duration::from_secs(7 * 86400)))
        .await
        .unwrap();
    assert_eq!(dropped, 1);
    assert!(!partitions(&app)
        .await
        .contains(&"provider_call_old".to_string()));
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call").await,
        1,
        "today's call stays"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_result").await,
        3,
        "dedup kept"
    );
    assert_eq!(spent_today(&app).await, 0.25);
    assert_eq!(
        total_calls(&app).await,
        3,
        "the money of dropped days stays in the totals"
    );
}

/// The migrations' SQL in order, up to (and without) `version`.
fn migrations_before(version: u32) -> Vec<(u32, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let mut files: Vec<(u32, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let number = name[1..name.find("__").unwrap()].parse().unwrap();
            (number, std::fs::read_to_string(&path).unwrap())
        })
        .filter(|(number, _)| *number <= version)
        .collect();
    files.sort_by_key(|(number, _)| *number);
    files
}

#[tokio::test]
async fn an_existing_ledger_becomes_the_partition_before_with_its_rows_totals_and_ids() {
    let url = crate::helpers::fresh_database().await;
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut files = migrations_before(14);
    let (_, partitioning) = files.pop().unwrap();
    for (_, sql) in &files {
        client.batch_execute(sql).await.unwrap();
    }
    let insert =
        "INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, \
                  model_version, prompt_version, cost_usd, started_at) \
                  VALUES (1, 'k', 1, 'w', 'openai', 'm', 'v', 0.5, now() - interval '3 days'), \
                         (2, 'k2', 1, 'w', 'openai', 'm', 'v', 0.25, now()) RETURNING id";
    let old_ids: Vec<i64> = client
        .query(insert, &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let totals = "SELECT sum(calls)::bigint, sum(cost_usd)::float8 FROM provider_call_hour";
    let before: (i64, f64) = {
        let row = client.query_one(totals, &[]).await.unwrap();
        (row.get(0), row.get(1))
    };

    client.batch_execute(&partitioning).await.unwrap();

    let kept = client
        .query_one(
            "SELECT count(*) FILTER (WHERE tableoid = 'provider_call_before'::regclass) FROM provider_call",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(kept.get::<_, i64>(0), 2, "the rows stay where they were");
    let row = client.query_one(totals, &[]).await.unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, f64>(1)), before);
    // The totals still follow the rows' writes, once each (one trigger, not two).
    client
        .execute(
            "UPDATE provider_call SET cost_usd = 1 WHERE idempotency_key = 'k2'",
            &[],
        )
        .await
        .unwrap();
    let row = client.query_one(totals, &[]).await.unwrap();
    assert_eq!(row.get::<_, f64>(1), before.1 + 0.75);
    // The ids go on from the same sequence; tomorrow's calls go to tomorrow's partition.
    let row = client
        .query_one(
            "INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, \
             model_version, prompt_version, started_at) \
             VALUES (3, 'k3', 1, 'w', 'openai', 'm', 'v', date_trunc('day', now(), 'UTC') + interval '1 day') \
             RETURNING id, tableoid::regclass::text",
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, i64>(0) > old_ids[1]);
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(1)).format("provider_call_%Y%m%d");
    assert_eq!(row.get::<_, String>(1), tomorrow.to_string());
}

#[tokio::test]
async fn a_sweep_while_the_ledger_is_busy_leaves_the_new_days_to_the_next_one() {
    let app = spawn_app().await;
    let before = partitions(&app).await;
    let mut busy = app.pool.get().await.unwrap();
    let writing = busy.transaction().await.unwrap();
    writing
        .batch_execute("LOCK TABLE provider_call IN ROW EXCLUSIVE MODE")
        .await
        .unwrap();
    let client = app.pool.get().await.unwrap();
    assert_eq!(
        ledger::maintain_partitions(&client, 10, None)
            .await
            .unwrap(),
        0,
        "the sweep goes on"
    );
    assert_eq!(
        partitions(&app).await,
        before,
        "nothing created under the lock"
    );
    writing.commit().await.unwrap();
    ledger::maintain_partitions(&client, 10, None)
        .await
        .unwrap();
    assert_eq!(
        partitions(&app).await.len(),
        before.len() + 7,
        "days 4 to 10 ahead"
    );
}
