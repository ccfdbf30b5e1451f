//! Reprocess: tickets queued under new keys (once), since a duration or a time, a dry run,
//! available_at spread, pages, and refusals of unknown versions.

use fake_provider::FakeProvider;
use serde_json::{json, Value};
use triage::{domain::key::IdempotencyKey, operations};

use crate::helpers::{
    operations::{op, try_op},
    spawn_app, spawn_app_with_fake,
};

use super::{reprocess_v4, tickets, DRAIN};

fn counts(report: &Value) -> (i64, i64, i64, i64) {
    let n = |field: &str| report[field].as_i64().unwrap();
    (
        n("tickets"),
        n("inserted"),
        n("already_queued"),
        n("links_added"),
    )
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
    app.exec("DELETE FROM evaluation_outbox WHERE status = 'done'")
        .await;
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
    app.exec(
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
