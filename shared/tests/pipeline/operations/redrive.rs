//! Redrive: dead letters back with attempts reset, by reason, since, limit and dry run,
//! in batches up to the limit.

use fake_provider::{Behavior, FakeProvider};
use serde_json::json;

use crate::helpers::{operations::op, spawn_app, spawn_app_with_fake};

use super::{tickets, DRAIN};

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
    app.exec("UPDATE evaluation_outbox SET status = 'dead', attempts = 5, finished_at = now(), error_class = 'contract_violation' WHERE id <= 3;
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
    app.exec("UPDATE evaluation_outbox SET status = 'dead', attempts = 5, finished_at = now(), error_class = 'attempts_exhausted'",
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
