//! Operations (docs/runbook.md) through `ops::run`, fed the same JSON payloads the ops Lambda
//! receives: reprocess, shadow diff, promotion, redrive, and the prompt registry.

use std::time::{Duration, Instant};

use fake_provider::{Behavior, FakeProvider};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use triage::{
    domain::key::IdempotencyKey,
    operations,
    providers::{Policy, Prompt},
};

use crate::helpers::{spawn_app, spawn_app_with_fake, TestApp};

const DRAIN: Duration = Duration::from_secs(60);

/// Runs a payload as the ops Lambda would, and returns the response it would send.
pub async fn op(app: &TestApp, payload: Value) -> Value {
    serde_json::to_value(try_op(app, payload).await.expect("operation succeeds")).unwrap()
}

pub async fn try_op(app: &TestApp, payload: Value) -> triage::Result<operations::Outcome> {
    let request: operations::Request = serde_json::from_value(payload).expect("payload parses");
    let operator = operations::Operator::lambda("arn:aws:lambda:test:ops", "request-1");
    operations::run(&app.pool, &app.config, request, &operator).await
}

/// Runs a payload as the CLI would (`triage eval` without waiting): the only place a set may
/// be a local file.
pub async fn op_cli(app: &TestApp, payload: Value) -> Value {
    serde_json::to_value(try_op_cli(app, payload).await.expect("operation succeeds")).unwrap()
}

pub async fn try_op_cli(app: &TestApp, payload: Value) -> triage::Result<operations::Outcome> {
    let request: operations::Request = serde_json::from_value(payload).expect("payload parses");
    let operator = operations::Operator::os_user();
    operations::run(&app.pool, &app.config, request, &operator).await
}

fn tickets(prefix: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("{prefix} {i}"), format!("message {i}")))
        .collect()
}

async fn exec(app: &TestApp, sql: &str) {
    let client = app.pool.get().await.unwrap();
    client.batch_execute(sql).await.unwrap();
}

fn answer(department: &str, urgency_score: f64) -> Behavior {
    Behavior::Answer(json!({
        "is_urgent": urgency_score,
        "department": department,
        "urgency_score": urgency_score,
    }))
}

fn reprocess_v4(since: &str, spread: &str) -> Value {
    json!({"op": "reprocess", "since": since, "prompt_version": "triage-v4", "spread": spread})
}

fn counts(report: &Value) -> (i64, i64, i64, i64) {
    let n = |field: &str| report[field].as_i64().unwrap();
    (
        n("tickets"),
        n("inserted"),
        n("already_queued"),
        n("links_added"),
    )
}

async fn post(app: &TestApp, subject: &str) -> String {
    let created = app.post_ticket(subject, "body of the ticket").await;
    assert_eq!(created.status, 201);
    created.body["id"].as_str().unwrap().to_string()
}

async fn shown(app: &TestApp, id: &str) -> Value {
    app.get_ticket(id).await.body["evaluation"].clone()
}

#[tokio::test]
async fn reprocess_queues_tickets_under_new_keys_and_running_it_again_adds_nothing() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    app.ingest_many(&tickets("ticket", 5)).await;
    app.drain(&app.worker(), DRAIN).await;

    let first = op(&app, reprocess_v4("1h", "0s")).await;
    assert_eq!(counts(&first), (5, 5, 0, 5));
    assert_eq!(
        first["model_version"], "gpt-6-luna@medium",
        "the configured model"
    );
    let expected =
        IdempotencyKey::derive("ticket 0", "message 0", "triage-v4", "gpt-6-luna@medium");
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM evaluation_outbox WHERE idempotency_key = '{expected}'
               AND prompt_version = 'triage-v4' AND model_version = 'gpt-6-luna@medium'"
        ))
        .await,
        1
    );

    assert_eq!(
        counts(&op(&app, reprocess_v4("1h", "0s")).await),
        (5, 0, 5, 0)
    );
    // Evaluated and then removed by retention: the results still make the keys known.
    app.drain(&app.worker(), DRAIN).await;
    exec(&app, "DELETE FROM evaluation_outbox WHERE status = 'done'").await;
    assert_eq!(
        counts(&op(&app, reprocess_v4("1h", "0s")).await),
        (5, 0, 5, 0)
    );
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 0);
    assert_eq!(
        fake.billed_calls().len(),
        10,
        "each content once per version"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_result").await,
        10,
        "old results stay"
    );
}

#[tokio::test]
async fn reprocess_takes_only_tickets_created_since_a_duration_or_a_time() {
    let app = spawn_app().await;
    app.ingest_many(&tickets("ticket", 3)).await;
    exec(
        &app,
        "UPDATE ticket SET created_at = now() - interval '2 days' WHERE subject <> 'ticket 0'",
    )
    .await;
    assert_eq!(counts(&op(&app, reprocess_v4("1d", "0s")).await).0, 1);
    let three_days_ago = (chrono::Utc::now() - chrono::Duration::days(3)).to_rfc3339();
    assert_eq!(
        counts(&op(&app, reprocess_v4(&three_days_ago, "0s")).await),
        (3, 2, 1, 2)
    );
}

#[tokio::test]
async fn a_dry_run_counts_what_reprocess_would_do_and_writes_nothing() {
    let app = spawn_app().await;
    let mut input = tickets("ticket", 3);
    input.push(input[0].clone()); // a duplicate: one job, two links
    app.ingest_many(&input).await;
    let before = app.count("SELECT count(*) FROM evaluation_outbox").await;

    let mut payload = reprocess_v4("1h", "0s");
    payload["dry_run"] = json!(true);
    let dry = op(&app, payload).await;
    assert_eq!(dry["dry_run"], true);
    assert_eq!(counts(&dry), (4, 3, 0, 4));
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox").await,
        before
    );
    assert_eq!(
        app.count("SELECT count(*) FROM ticket_evaluation WHERE prompt_version = 'triage-v4'")
            .await,
        0
    );

    let real = op(&app, reprocess_v4("1h", "0s")).await;
    assert_eq!(counts(&real), counts(&dry), "the dry run said what happens");
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE prompt_version = 'triage-v4'")
            .await,
        3
    );
}

#[tokio::test]
async fn reprocess_spreads_available_at_over_the_spread_or_thirty_minutes() {
    let app = spawn_app().await;
    app.ingest_many(&tickets("ticket", 200)).await;
    let client = app.pool.get().await.unwrap();
    let started: chrono::DateTime<chrono::Utc> =
        client.query_one("SELECT now()", &[]).await.unwrap().get(0);
    op(&app, reprocess_v4("1h", "10m")).await;
    op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v3", "model_version": "other-model@low"}),
    )
    .await;
    for (prompt, model, minutes) in [
        ("triage-v4", "rules@offline", 10.0),
        ("triage-v3", "other-model@low", 30.0),
    ] {
        let row = client
            .query_one(
                "SELECT min(available_at) >= $3,
                        extract(epoch FROM max(available_at) - $3)::float8 / 60,
                        extract(epoch FROM max(available_at) - min(available_at))::float8 / 60
                 FROM evaluation_outbox WHERE prompt_version = $1 AND model_version = $2",
                &[&prompt, &model, &started],
            )
            .await
            .unwrap();
        let (not_before, latest, range): (bool, f64, f64) = (row.get(0), row.get(1), row.get(2));
        assert!(not_before, "{model}: nothing claimable before the run");
        // The slack covers the time the run itself took.
        assert!(
            latest <= minutes + 0.5,
            "{model}: within the spread ({latest} min)"
        );
        assert!(range > minutes / 2.0, "{model}: spread out ({range} min)");
    }
}

#[tokio::test]
async fn reprocess_pages_through_more_tickets_than_one_batch() {
    let app = spawn_app().await;
    app.ingest_many(&tickets("ticket", 2500)).await;
    let mut confirmed = reprocess_v4("1h", "0s");
    confirmed["confirm"] = json!(true);
    let first = op(&app, confirmed).await;
    assert_eq!(first["batches"], 3);
    assert_eq!(counts(&first), (2500, 2500, 0, 2500));
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE prompt_version = 'triage-v4'")
            .await,
        2500
    );
    assert_eq!(
        counts(&op(&app, reprocess_v4("1h", "0s")).await),
        (2500, 0, 2500, 0)
    );
}

#[tokio::test]
async fn reprocess_refuses_an_unknown_prompt_version_or_a_model_without_effort() {
    let app = spawn_app().await;
    let error = try_op(
        &app,
        json!({"op": "reprocess", "since": "1d", "prompt_version": "triage-v9"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, triage::Error::InvalidRequest(_)), "{error}");
    assert!(error.to_string().contains("not in this build"), "{error}");
    // A model version without its effort is refused where the payload is read, before
    // anything runs: it would key every ticket anew.
    let payload = r#"{"op": "reprocess", "since": "1d", "prompt_version": "triage-v4", "model_version": "gpt-6-luna"}"#;
    let error = serde_json::from_str::<operations::Request>(payload).unwrap_err();
    assert!(error.to_string().contains("model@effort"), "{error}");
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 0);
}

#[tokio::test]
async fn shadow_diff_after_reprocess_shows_agreement_confusion_and_the_largest_disagreements() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    fake.set_default(answer("billing", 0.2));
    let mut input = tickets("steady", 4);
    for subject in ["to technical", "to sales", "more urgent"] {
        input.push((subject.to_string(), "message".to_string()));
    }
    app.ingest_many(&input).await;
    app.drain(&app.worker(), DRAIN).await;
    // The "new prompt" changes its mind on three tickets.
    fake.when_contains("to technical", answer("technical", 0.9));
    fake.when_contains("to sales", answer("sales", 0.3));
    fake.when_contains("more urgent", answer("billing", 0.95));
    op(&app, reprocess_v4("1h", "0s")).await;
    app.drain(&app.worker(), DRAIN).await;

    let diff = op(
        &app,
        json!({"op": "shadow_diff", "from": "triage-v3/gpt-6-luna@medium", "to": "triage-v4"}),
    )
    .await;
    assert_eq!(diff["compared"], 7);
    assert_eq!(diff["to"]["model_version"], "gpt-6-luna@medium");
    let agreement = diff["department_agreement"].as_f64().unwrap();
    assert!((agreement - 5.0 / 7.0).abs() < 1e-9, "{agreement}");
    assert_eq!(
        diff["confusion"],
        json!([
            {"from": "billing", "to": "billing", "count": 5},
            {"from": "billing", "to": "sales", "count": 1},
            {"from": "billing", "to": "technical", "count": 1},
        ])
    );
    let u = &diff["urgency_diff"];
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(
        close(&u["min"], 0.0) && close(&u["p50"], 0.0) && close(&u["max"], 0.75),
        "{u}"
    );
    let histogram: Vec<i64> = u["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_i64().unwrap())
        .collect();
    assert_eq!(histogram, [0, 0, 0, 4, 1, 0, 2]);

    let subjects = ticket_subjects(&app).await;
    let largest: Vec<&str> = diff["largest_disagreements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| subjects[d["ticket_id"].as_str().unwrap()].as_str())
        .collect();
    assert_eq!(largest, ["to technical", "to sales", "more urgent"]);
}

async fn ticket_subjects(app: &TestApp) -> std::collections::HashMap<String, String> {
    let client = app.pool.get().await.unwrap();
    client
        .query("SELECT id::text, subject FROM ticket", &[])
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[tokio::test]
async fn shadow_diff_of_versions_without_common_tickets_compares_nothing() {
    let app = spawn_app().await;
    let diff = op(
        &app,
        json!({"op": "shadow_diff", "from": "triage-v3", "to": "triage-v4"}),
    )
    .await;
    assert_eq!(diff["compared"], 0);
    assert_eq!(diff["department_agreement"], Value::Null);
    assert_eq!(diff["urgency_diff"]["histogram"], json!([]));
}

#[tokio::test]
async fn promoting_a_version_changes_what_get_shows_and_the_response_says_so() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    fake.set_default(answer("billing", 0.2));
    let id = post(&app, "Charged twice").await;
    app.drain(&app.worker(), DRAIN).await;
    fake.set_default(answer("technical", 0.8));
    op(&app, reprocess_v4("1h", "0s")).await;
    app.drain(&app.worker(), DRAIN).await;

    let before = shown(&app, &id).await;
    assert_eq!(
        (
            &before["prompt_version"],
            &before["department"],
            &before["shown_because"]
        ),
        (&json!("triage-v3"), &json!("billing"), &json!("configured"))
    );

    let promotion = op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v4", "force": true, "reason": "no eval set in this test"}),
    )
    .await;
    assert_eq!(promotion["model_version"], "gpt-6-luna@medium");
    assert_eq!(promotion["previous"], Value::Null, "the configured version");
    let after = shown(&app, &id).await;
    assert_eq!(
        (
            &after["prompt_version"],
            &after["department"],
            &after["shown_because"]
        ),
        (&json!("triage-v4"), &json!("technical"), &json!("promoted"))
    );
    assert_eq!(after["requested_prompt_version"], "triage-v4");

    // Undoing is promoting the previous version again.
    let undo = op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v3", "force": true, "reason": "no eval set in this test"}),
    )
    .await;
    assert_eq!(undo["previous"]["prompt_version"], "triage-v4");
    let undone = shown(&app, &id).await;
    assert_eq!(
        (&undone["prompt_version"], &undone["shown_because"]),
        (&json!("triage-v3"), &json!("promoted"))
    );
    assert_eq!(
        app.count("SELECT count(*) FROM version_promotion").await,
        2,
        "history"
    );
}

#[tokio::test]
async fn a_ticket_without_a_result_under_the_active_version_shows_its_newest_result() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post(&app, "Evaluated under both").await;
    app.drain(&app.worker(), DRAIN).await;
    op(&app, reprocess_v4("1h", "0s")).await;
    app.drain(&app.worker(), DRAIN).await;
    op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v4", "force": true, "reason": "no eval set in this test"}),
    )
    .await;

    // Ingest keys new tickets under the configured version (v3), not the promoted one.
    let newer = post(&app, "Only under v3").await;
    app.drain(&app.worker(), DRAIN).await;
    let only_v3 = shown(&app, &newer).await;
    assert_eq!(
        (
            &only_v3["status"],
            &only_v3["prompt_version"],
            &only_v3["shown_because"]
        ),
        (&json!("done"), &json!("triage-v3"), &json!("newest"))
    );

    // Queued under v4 but not evaluated yet: the v3 result is still what it shows.
    op(&app, reprocess_v4("1h", "1h")).await;
    let queued = shown(&app, &newer).await;
    assert_eq!(
        (
            &queued["status"],
            &queued["prompt_version"],
            &queued["shown_because"]
        ),
        (&json!("done"), &json!("triage-v3"), &json!("newest"))
    );

    // No result at all: the status of what it is queued under.
    let waiting = post(&app, "Not evaluated yet").await;
    let pending = shown(&app, &waiting).await;
    assert_eq!(
        (
            &pending["status"],
            &pending["requested_prompt_version"],
            &pending["shown_because"]
        ),
        (&json!("pending"), &json!("triage-v3"), &json!("newest"))
    );
}

#[tokio::test]
async fn promote_refuses_a_version_without_any_result() {
    let app = spawn_app().await;
    let error = try_op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v4", "force": true, "reason": "no eval set in this test"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, triage::Error::InvalidRequest(_)), "{error}");
    assert!(
        error.to_string().contains("no evaluation exists"),
        "{error}"
    );
    assert_eq!(app.count("SELECT count(*) FROM version_promotion").await, 0);
}

#[tokio::test]
async fn redrive_moves_dead_letters_back_with_attempts_reset_and_a_second_run_finds_nothing() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    fake.set_default(Behavior::InvalidRequest);
    app.ingest_many(&tickets("ticket", 3)).await;
    app.drain(&app.worker(), DRAIN).await;
    assert_eq!(app.status_counts().await.get("dead"), Some(&3));

    fake.set_default(Behavior::Classify);
    let moved = op(&app, json!({"op": "redrive", "spread": "0s"})).await;
    assert_eq!(moved["moved"], 3);
    assert_eq!(moved["by_reason"], json!({"invalid_request": 3}));
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0
               AND finished_at IS NULL AND last_error IS NOT NULL"
        )
        .await,
        3,
        "back in the queue, attempts reset, the cause kept"
    );
    assert_eq!(op(&app, json!({"op": "redrive"})).await["moved"], 0);

    app.drain(&app.worker(), DRAIN).await;
    assert_eq!(app.status_counts().await.get("done"), Some(&3));
}

#[tokio::test]
async fn redrive_honours_reason_since_limit_and_dry_run() {
    let app = spawn_app().await;
    app.ingest_many(&tickets("ticket", 6)).await;
    exec(
        &app,
        "UPDATE evaluation_outbox SET status = 'dead', attempts = 5, finished_at = now(), error_class = 'contract_violation' WHERE id <= 3;
         UPDATE evaluation_outbox SET status = 'dead', attempts = 5, finished_at = now(), error_class = 'lease_expired' WHERE id = 4;
         UPDATE evaluation_outbox SET status = 'dead', attempts = 5, finished_at = now() - interval '2 days', error_class = 'invalid_request' WHERE id > 4;",
    )
    .await;
    let dead = || app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'");

    let dry = op(
        &app,
        json!({"op": "redrive", "reason": "contract_violation", "dry_run": true}),
    )
    .await;
    assert_eq!(
        (dry["moved"].as_i64(), dry["dry_run"].as_bool()),
        (Some(3), Some(true))
    );
    assert_eq!(
        op(
            &app,
            json!({"op": "redrive", "since": "1d", "dry_run": true})
        )
        .await["moved"],
        4
    );
    assert_eq!(dead().await, 6, "dry runs write nothing");

    let limited = op(
        &app,
        json!({"op": "redrive", "reason": "contract_violation", "limit": 2}),
    )
    .await;
    assert_eq!(limited["moved"], 2);
    let recent = op(&app, json!({"op": "redrive", "since": "1d"})).await;
    assert_eq!(
        recent["by_reason"],
        json!({"contract_violation": 1, "lease_expired": 1})
    );
    assert_eq!(dead().await, 2, "the old ones wait");
    assert_eq!(op(&app, json!({"op": "redrive"})).await["moved"], 2);
    assert_eq!(dead().await, 0);
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE available_at > now() + interval '30 minutes'")
            .await,
        0,
        "spread over the default 30 minutes"
    );
}

#[tokio::test]
async fn redrive_works_in_batches_up_to_the_limit() {
    let app = spawn_app().await;
    app.ingest_many(&tickets("ticket", 1500)).await;
    exec(
        &app,
        "UPDATE evaluation_outbox SET status = 'dead', attempts = 5, finished_at = now(), error_class = 'attempts_exhausted'",
    )
    .await;
    assert_eq!(
        op(
            &app,
            json!({"op": "redrive", "limit": 1200, "confirm": true})
        )
        .await["moved"],
        1200
    );
    assert_eq!(op(&app, json!({"op": "redrive"})).await["moved"], 300);
    assert_eq!(op(&app, json!({"op": "redrive"})).await["moved"], 0);
}

fn prompt_hash(version: &str) -> String {
    let prompt = Prompt::load(version, &Policy::load("policy-v1").unwrap()).unwrap();
    hex::encode(Sha256::digest(prompt.text.as_bytes()))
}

#[tokio::test]
async fn a_worker_records_the_text_hash_of_every_prompt_version_it_carries() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    app.run_worker_once(&app.worker()).await;
    let client = app.pool.get().await.unwrap();
    let recorded: Vec<(String, String)> = client
        .query(
            "SELECT prompt_version, sha256 FROM prompt_registry ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let expected: Vec<(String, String)> = Prompt::known_versions()
        .map(|v| (v.to_string(), prompt_hash(v)))
        .collect();
    assert_eq!(recorded, expected);
    // A second worker with the same texts runs.
    app.run_worker_once(&app.worker()).await;
}

#[tokio::test]
async fn a_worker_refuses_to_run_when_the_text_behind_a_prompt_version_changed() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    // An earlier build ran triage-v3 with another text.
    exec(
        &app,
        "INSERT INTO prompt_registry (prompt_version, sha256) VALUES ('triage-v3', encode(sha256('an earlier text'), 'hex'))",
    )
    .await;
    post(&app, "Waiting").await;

    let worker = app.worker();
    for _ in 0..2 {
        let deadline = Instant::now() + app.config.worker.invocation_budget;
        let error = worker
            .run_invocation(deadline, &CancellationToken::new())
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, triage::Error::Config(_)), "{message}");
        assert!(
            message.contains("triage-v3") && message.contains("new version"),
            "{message}"
        );
    }
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0"
        )
        .await,
        1,
        "nothing claimed"
    );
    assert!(fake.calls().is_empty(), "nothing called");
}

#[tokio::test]
async fn the_ops_lambda_accepts_every_payload_in_the_runbook() {
    let runbook =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/runbook.md"))
            .expect("docs/runbook.md");
    let payloads: Vec<&str> = runbook
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("{\"op\""))
        .collect();
    let ops: std::collections::BTreeSet<String> = payloads
        .iter()
        .map(|payload| {
            let parsed: Result<operations::Request, _> = serde_json::from_str(payload);
            assert!(parsed.is_ok(), "{payload}: {}", parsed.unwrap_err());
            serde_json::from_str::<Value>(payload).unwrap()["op"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        ops.into_iter().collect::<Vec<_>>(),
        [
            "audit",
            "dead_letters",
            "erase",
            "eval",
            "feedback",
            "models",
            "pause",
            "promote",
            "redrive",
            "reprocess",
            "resume",
            "shadow_diff",
            "stats",
            "train"
        ]
    );

    let app = spawn_app().await;
    let stats = op(&app, json!({"op": "stats"})).await;
    assert!(stats["oldest_pending_age_seconds"].is_number(), "{stats}");
    assert_eq!(
        op(&app, json!({"op": "dead_letters", "since": "7d"})).await,
        json!([])
    );
}

#[test]
fn the_ops_lambda_refuses_unknown_ops_fields_and_malformed_values() {
    for payload in [
        r#"{"op": "explode"}"#,
        r#"{"op": "reprocess", "since": "1d", "prompt_version": "triage-v4", "sprad": "1m"}"#,
        r#"{"op": "reprocess", "since": "yesterday", "prompt_version": "triage-v4"}"#,
        r#"{"op": "shadow_diff", "from": "/gpt-6-luna@high", "to": "triage-v4"}"#,
        r#"{"op": "redrive", "spread": "soon"}"#,
    ] {
        assert!(
            serde_json::from_str::<operations::Request>(payload).is_err(),
            "{payload} parsed"
        );
    }
}
