//! What on-call sees: retention that keeps dedup, the dead-letter report, queue health, and
//! logs that never carry ticket text or secrets.

use std::{
    io::Write,
    sync::{Arc, Mutex},
    time::Duration,
};

use fake_provider::{Behavior, FakeProvider};
use triage::pipeline::{
    outbox::claim::Serves,
    reads::report::{self, Health},
    sweep,
};

use crate::helpers::{spawn_app, spawn_app_with_fake, TestApp};

/// The queue as this app's own workers see it.
async fn queue_health(app: &TestApp) -> Health {
    let serves = Serves::for_model_version(&app.config.versions.model);
    report::health(&app.pool, serves, None).await.unwrap()
}

#[tokio::test]
async fn a_duplicate_arriving_after_retention_is_a_dedup_hit_without_a_call() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    app.post_ticket("Old news", "same content").await;
    app.run_worker_once(&app.worker()).await;
    app.exec("UPDATE evaluation_outbox SET finished_at = now() - interval '8 days'")
        .await;

    let report = sweep::sweep(&app.pool, &app.config).await.unwrap();
    assert_eq!(report.retention_deleted, 1);
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 0);
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_result").await,
        1,
        "results are kept"
    );

    let again = app.post_ticket("Old news", "same content").await;
    let worker_report = app.run_worker_once(&app.worker()).await;
    assert_eq!((worker_report.dedup_hits, worker_report.evaluated), (1, 0));
    assert_eq!(fake.calls().len(), 1, "no second model call");
    let shown = app.get_ticket(again.body["id"].as_str().unwrap()).await;
    assert_eq!(shown.body["evaluation"]["status"], "done");

    // One call not made, counted once: the duplicate ticket and its dedup hit are the same
    // saving.
    let health = queue_health(&app).await;
    assert_eq!((health.dedup_hits, health.duplicate_tickets), (1, 1));
    assert!(
        (health.saved_usd - health.cost_usd).abs() < 1e-9,
        "saved {} for one call of {}",
        health.saved_usd,
        health.cost_usd
    );
}

#[tokio::test]
async fn retention_deletes_in_bounded_batches_and_keeps_young_and_dead_rows() {
    let app = spawn_app_with_fake(&FakeProvider::start().await, |c| {
        c.retention.batch_size = 10;
        c.retention.max_batches_per_sweep = 2;
    })
    .await;
    let tickets: Vec<_> = (0..30)
        .map(|i| (format!("t{i}"), "m".to_string()))
        .collect();
    app.ingest_many(&tickets).await;
    app.exec("UPDATE evaluation_outbox SET status = 'done', finished_at = now() - interval '30 days' WHERE id <= 25;
         UPDATE evaluation_outbox SET status = 'dead', finished_at = now() - interval '30 days' WHERE id > 28;",
    )
    .await;
    assert_eq!(
        sweep::apply_retention(&app.pool, &app.config.retention)
            .await
            .unwrap(),
        20,
        "two batches of ten"
    );
    assert_eq!(
        sweep::apply_retention(&app.pool, &app.config.retention)
            .await
            .unwrap(),
        5
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox").await,
        5,
        "pending and dead rows stay"
    );
}

#[tokio::test]
async fn the_dead_letter_report_groups_the_last_day_by_reason() {
    let app = spawn_app().await;
    let tickets: Vec<_> = (0..6).map(|i| (format!("t{i}"), "m".to_string())).collect();
    app.ingest_many(&tickets).await;
    app.exec("UPDATE evaluation_outbox SET status = 'dead', finished_at = now(), error_class = 'contract_violation' WHERE id <= 3;
         UPDATE evaluation_outbox SET status = 'dead', finished_at = now(), error_class = 'lease_expired' WHERE id = 4;
         UPDATE evaluation_outbox SET status = 'dead', finished_at = now() - interval '2 days', error_class = 'invalid_request' WHERE id = 5;",
    )
    .await;
    let groups = report::dead_letters(&app.pool, Duration::from_secs(24 * 3600))
        .await
        .unwrap();
    let summary: Vec<(&str, i64)> = groups
        .iter()
        .map(|g| (g.reason.as_str(), g.count))
        .collect();
    assert_eq!(summary, [("contract_violation", 3), ("lease_expired", 1)]);
    let week = report::dead_letters(&app.pool, Duration::from_secs(7 * 24 * 3600))
        .await
        .unwrap();
    assert_eq!(week.len(), 3);
}

#[tokio::test]
async fn queue_health_ignores_delayed_retries_when_aging_the_queue() {
    let app = spawn_app().await;
    let tickets: Vec<_> = (0..3).map(|i| (format!("t{i}"), "m".to_string())).collect();
    app.ingest_many(&tickets).await;
    // A retry waiting out its backoff is not a stuck queue.
    app.exec("UPDATE evaluation_outbox SET available_at = now() + interval '10 minutes', created_at = now() - interval '1 hour'").await;
    let health = queue_health(&app).await;
    assert_eq!((health.pending, health.delayed), (3, 3));
    assert_eq!(health.oldest_pending_age_seconds, 0.0);
    app.exec(
        "UPDATE evaluation_outbox SET available_at = now() - interval '90 seconds' WHERE id = 1",
    )
    .await;
    let health = queue_health(&app).await;
    assert!(
        health.oldest_pending_age_seconds >= 90.0,
        "{}",
        health.oldest_pending_age_seconds
    );
}

#[tokio::test]
async fn rules_jobs_left_by_a_smoke_test_do_not_age_a_model_deployments_queue() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let tickets: Vec<_> = (0..3).map(|i| (format!("t{i}"), "m".to_string())).collect();
    app.ingest_many(&tickets).await;
    // Two jobs as a `Provider=rules` smoke test left them an hour ago: no model worker will
    // ever claim them. The third is a model job, waiting 90 s.
    app.exec("UPDATE evaluation_outbox SET model_version = 'rules@offline', available_at = now() - interval '1 hour' WHERE id <= 2").await;
    app.exec(
        "UPDATE evaluation_outbox SET available_at = now() - interval '90 seconds' WHERE id = 3",
    )
    .await;

    // The sweeper reports (and emits) what the deployed workers can claim.
    let swept = sweep::sweep(&app.pool, &app.config).await.unwrap().health;
    assert_eq!((swept.pending, swept.unserved_pending), (3, 2));
    assert!(
        (90.0..3600.0).contains(&swept.oldest_pending_age_seconds),
        "the model job's age, not the leftovers': {}",
        swept.oldest_pending_age_seconds
    );
    // Once the model job is done, nothing claimable waits: the age alarm can clear.
    app.exec("UPDATE evaluation_outbox SET status = 'done', finished_at = now() WHERE id = 3")
        .await;
    let swept = sweep::sweep(&app.pool, &app.config).await.unwrap().health;
    assert_eq!(
        (swept.oldest_pending_age_seconds, swept.unserved_pending),
        (0.0, 2)
    );
    // A rules deployment sees the same two jobs as its own backlog.
    let rules = report::health(&app.pool, Serves::RulesOnly, None)
        .await
        .unwrap();
    assert_eq!(rules.unserved_pending, 0);
    assert!(rules.oldest_pending_age_seconds >= 3600.0);
}

#[tokio::test]
async fn stats_count_billed_calls_spend_and_what_the_key_saved() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    for _ in 0..3 {
        app.post_ticket("Same", "content").await;
    }
    app.post_ticket("Other", "content").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    let health = queue_health(&app).await;
    assert_eq!(
        (health.done, health.billed_calls, health.duplicate_tickets),
        (2, 2, 2)
    );
    assert!(health.cost_usd > 0.0);
    let per_call = health.cost_usd / 2.0;
    assert!(
        (health.saved_usd - 2.0 * per_call).abs() < 1e-9,
        "two duplicate tickets saved two calls"
    );
    let json = serde_json::to_value(&health).unwrap();
    for field in [
        "pending",
        "processing",
        "done",
        "dead",
        "oldest_pending_age_seconds",
        "dedup_hits",
        "billed_calls",
        "cost_usd",
    ] {
        assert!(json.get(field).is_some(), "stats JSON lacks {field}");
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn logs_never_contain_ticket_text_or_secrets_even_at_rust_log_trace() {
    let captured = Captured::default();
    let writer = captured.clone();
    // What a deployment with RUST_LOG=trace writes: every library at its most talkative but
    // the capped ones (tokio_postgres logs statement parameters, through the `log` crate).
    let _guard = triage::telemetry::set_default_with(move || writer.clone(), "trace");

    let fake = FakeProvider::start().await;
    fake.when_contains("flaky", Behavior::Status(500));
    fake.when_contains("weird", Behavior::OutOfContract);
    fake.when_contains("rejected", Behavior::InvalidRequest);
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let secrets = [
        "flaky SECRET-SUBJECT-1",
        "weird SECRET-SUBJECT-2",
        "rejected SECRET-SUBJECT-3",
        "fine SECRET-SUBJECT-4",
    ];
    for subject in secrets {
        app.post_ticket(subject, "SECRET-MESSAGE-BODY with card 4111 1111 1111 1111")
            .await;
    }
    let worker = app.worker();
    for _ in 0..3 {
        app.run_worker_once(&worker).await;
    }
    sweep::sweep(&app.pool, &app.config).await.unwrap();

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("provider call failed"),
        "the failures were logged:\n{logs}"
    );
    // Nor the content keys: a hash of the text confirms a guessed text, even after erasure.
    let client = app.pool.get().await.unwrap();
    let keys: Vec<String> = client
        .query("SELECT idempotency_key FROM evaluation_outbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(keys.len(), secrets.len());
    for key in &keys {
        assert!(
            !logs.contains(key.as_str()),
            "key {key} in the logs:\n{logs}"
        );
    }
    for forbidden in ["SECRET-SUBJECT", "SECRET-MESSAGE", "4111", "sk-test-secret"] {
        assert!(
            !logs.contains(forbidden),
            "{forbidden:?} leaked into the logs:\n{logs}"
        );
    }
}

#[tokio::test]
async fn worker_sweeper_and_retrain_emit_embedded_metric_format() {
    static COLLECTOR: std::sync::OnceLock<&'static metrics_cloudwatch_embedded::Collector> =
        std::sync::OnceLock::new();
    let collector = *COLLECTOR.get_or_init(|| triage::telemetry::lambda_metrics("test").unwrap());
    let fake = FakeProvider::start().await;
    fake.when_contains("broken", Behavior::OutOfContract);
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    app.post_ticket("fine", "m").await;
    app.post_ticket("broken", "m").await;
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    sweep::sweep(&app.pool, &app.config).await.unwrap();
    // A retrain that cannot run (no cascade configured) still counts as one that did not switch.
    let refused = crate::helpers::operations::try_op(&app, serde_json::json!({"op": "retrain"}));
    assert!(refused.await.is_err());
    // Under a cascade, the sweeper's check reports its live precision and whether it is
    // suspended (the alarm's metric), audits or none.
    let mut cascade = (*app.config).clone();
    cascade.versions.model = "cascade(local-0a1b2c,0.9,gpt-6-luna@medium)"
        .parse()
        .unwrap();
    triage::quality::live::check(&app.pool, &cascade)
        .await
        .unwrap();

    let mut out = Vec::new();
    collector.flush(&mut out).unwrap();
    let documents: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let names: std::collections::HashSet<String> = documents
        .iter()
        .flat_map(|doc| {
            doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|metric| metric["Name"].as_str().unwrap().to_string())
        .collect();
    for expected in [
        "outbox.evaluated",
        "outbox.dead_letter",
        "provider.latency_ms",
        "provider.cost_usd",
        "outbox.oldest_claimable_age_seconds",
        "outbox.depth",
        "provider.breaker_open",
        "models.retrain_failing_runs",
        "cascade.suspended",
        "cascade.precision_high",
    ] {
        assert!(
            names.contains(expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(documents
        .iter()
        .all(|doc| doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Triage"));
    let dead_letter = documents
        .iter()
        .find(|doc| doc.get("outbox.dead_letter").is_some())
        .unwrap();
    assert!(
        dead_letter.get("reason").is_some(),
        "dead letters carry their reason as a dimension"
    );
}
