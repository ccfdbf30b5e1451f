//! Lanes at the claim: new tickets are claimed before bulk work, which takes at most its
//! share while they wait; reprocess and redrive enqueue bulk work unless their operator
//! chooses the interactive lane.

use std::time::Duration;

use serde_json::json;
use triage::pipeline::outbox::{claim, Lane, Lanes};

use crate::{
    helpers::operations::op,
    helpers::{spawn_app, TestApp},
};

use super::{count, post_many};

async fn claim_lanes(app: &TestApp, batch: i64, share: f64) -> Vec<Lane> {
    let client = app.pool.get().await.unwrap();
    let lease = Duration::from_secs(60);
    let lanes = Lanes {
        bulk_share: share,
        ..Lanes::default()
    };
    claim::claim(&client, "w", batch, lease, claim::Serves::RulesOnly, lanes)
        .await
        .unwrap()
        .into_iter()
        .map(|job| job.lane)
        .collect()
}

#[tokio::test]
async fn new_tickets_are_claimed_first_and_bulk_work_takes_at_most_its_share_while_they_wait() {
    let app = spawn_app().await;
    post_many(&app, "backlog", 12).await;
    app.exec(
        "UPDATE evaluation_outbox SET lane = 'bulk', available_at = now() - interval '1 hour'",
    )
    .await;
    post_many(&app, "new", 3).await;
    // The bulk backlog is older, yet the three new tickets come first; bulk gets half the claim.
    let first = claim_lanes(&app, 10, 0.5).await;
    assert_eq!(first[..3], [Lane::Interactive; 3]);
    assert_eq!(
        (count(&first, Lane::Interactive), count(&first, Lane::Bulk)),
        (3, 5)
    );
    // No new ticket waits: bulk may take the whole claim.
    let second = claim_lanes(&app, 10, 0.5).await;
    assert_eq!(
        (
            count(&second, Lane::Interactive),
            count(&second, Lane::Bulk)
        ),
        (0, 7)
    );

    let app = spawn_app().await;
    post_many(&app, "backlog", 4).await;
    app.exec("UPDATE evaluation_outbox SET lane = 'bulk'").await;
    post_many(&app, "new", 12).await;
    // Interactive work filling the claim leaves bulk nothing; a zero share, nothing either.
    assert_eq!(count(&claim_lanes(&app, 10, 0.5).await, Lane::Bulk), 0);
    assert_eq!(claim_lanes(&app, 10, 0.0).await, [Lane::Interactive; 2]);
    assert_eq!(claim_lanes(&app, 10, 0.0).await, [Lane::Bulk; 4]);
}

#[tokio::test]
async fn reprocess_and_redrive_put_their_work_in_the_bulk_lane() {
    let app = spawn_app().await;
    post_many(&app, "ticket", 3).await;
    let lanes = "SELECT count(*) FROM evaluation_outbox WHERE lane = 'bulk'";
    assert_eq!(app.count(lanes).await, 0, "ingest is interactive");
    let report = op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v4", "spread": "0s"}),
    )
    .await;
    assert_eq!(report["inserted"], 3);
    assert_eq!(app.count(lanes).await, 3);

    app.exec("UPDATE evaluation_outbox SET status = 'dead', lane = 'interactive', finished_at = now(), error_class = 'timeout' WHERE prompt_version = 'triage-v3'")
        .await;
    assert_eq!(
        op(&app, json!({"op": "redrive", "spread": "0s"})).await["moved"],
        3
    );
    assert_eq!(app.count(lanes).await, 6);
}

#[tokio::test]
async fn a_reprocess_or_redrive_an_operator_puts_in_the_interactive_lane_is_claimed_ahead_of_bulk_work(
) {
    let app = spawn_app().await;
    post_many(&app, "ticket", 3).await;
    // Dead letters to redrive, and an older bulk backlog (a reprocess in its default lane).
    app.exec("UPDATE evaluation_outbox SET status = 'dead', finished_at = now(), error_class = 'timeout'")
        .await;
    let backlog = op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v4", "spread": "0s"}),
    )
    .await;
    assert_eq!(backlog["inserted"], 3);
    app.exec("UPDATE evaluation_outbox SET available_at = now() - interval '1 hour' WHERE status = 'pending'")
        .await;
    let urgent = json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v5", "spread": "0s", "lane": "interactive"});
    assert_eq!(op(&app, urgent).await["inserted"], 3);
    let redrive = json!({"op": "redrive", "spread": "0s", "lane": "interactive"});
    assert_eq!(op(&app, redrive).await["moved"], 3);

    // No share for bulk while interactive work waits: the six chosen jobs first, then the
    // older backlog.
    assert_eq!(claim_lanes(&app, 10, 0.0).await, [Lane::Interactive; 6]);
    assert_eq!(claim_lanes(&app, 10, 0.0).await, [Lane::Bulk; 3]);
    let chosen = "SELECT count(*) FROM evaluation_outbox WHERE lane = 'interactive' \
                  AND prompt_version IN ('triage-v3', 'triage-v5') AND locked_by = 'w'";
    assert_eq!(app.count(chosen).await, 6);
    // The audit trail names the lane each chose.
    let audited = app
        .count("SELECT count(*) FROM operation_audit WHERE parameters->>'lane' = 'interactive'")
        .await;
    assert_eq!(audited, 2);
}
