//! Audited operations: every run, whatever its end, leaves a row naming who ran it, what and
//! with which parameters; large reprocesses and redrives need a confirmation.

use serde_json::{json, Value};
use triage::domain::error::Error;

use crate::{
    helpers::operations::{op, try_op},
    helpers::{spawn_app, TestApp},
};

async fn audit(app: &TestApp) -> Vec<Value> {
    let listed = op(app, json!({"op": "audit"})).await;
    listed.as_array().unwrap().clone()
}

#[tokio::test]
async fn every_operation_is_audited_with_who_ran_it_what_and_how_it_ended() {
    let app = spawn_app().await;
    op(&app, json!({"op": "stats"})).await;
    let refused = try_op(
        &app,
        json!({"op": "reprocess", "since": "1d", "prompt_version": "triage-v9"}),
    )
    .await;
    assert!(matches!(refused, Err(Error::InvalidRequest(_))));
    op(
        &app,
        json!({"op": "erase", "ticket_ids": ["00000000-0000-4000-8000-000000000001"]}),
    )
    .await;

    // The listing's own row comes first, still running.
    let rows = audit(&app).await[1..].to_vec();
    let seen: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["op"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [("erase", "ok"), ("reprocess", "refused"), ("stats", "ok")]
    );
    let login: String = app.row("SELECT session_user::text").await.get(0);
    for row in &rows {
        assert_eq!(
            row["principal"],
            "lambda arn:aws:lambda:test:ops request request-1"
        );
        // The server's word for who wrote the row, whatever the client claims.
        assert_eq!(row["db_login"], login.as_str());
    }
    assert_eq!(
        rows[0]["parameters"]["ticket_ids"][0],
        "00000000-0000-4000-8000-000000000001"
    );
    assert_eq!(rows[0]["result"]["not_found"].as_array().unwrap().len(), 1);
    assert_eq!(rows[1]["parameters"]["prompt_version"], "triage-v9");
    assert!(rows[1]["error"].as_str().unwrap().contains("triage-v9"));
    // Listing the trail is itself a run on it.
    assert_eq!(audit(&app).await[0]["op"], "audit");
}

#[tokio::test]
async fn a_reprocess_or_redrive_of_more_than_a_thousand_jobs_needs_confirm() {
    let app = spawn_app().await;
    let tickets: Vec<(String, String)> = (0..1001)
        .map(|i| (format!("ticket {i}"), "body".to_string()))
        .collect();
    app.ingest_many(&tickets).await;
    let reprocess = json!({"op": "reprocess", "since": "1d", "prompt_version": "triage-v4"});
    let refused = try_op(&app, reprocess.clone()).await.unwrap_err();
    assert!(refused.to_string().contains("--confirm"), "{refused}");
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox").await,
        1001,
        "nothing queued"
    );

    let mut confirmed = reprocess;
    confirmed["confirm"] = json!(true);
    assert_eq!(op(&app, confirmed).await["inserted"], 1001);

    app.exec("UPDATE evaluation_outbox SET status = 'dead', finished_at = now(), error_class = 'attempts_exhausted'").await;
    assert!(try_op(&app, json!({"op": "redrive"})).await.is_err());
    assert_eq!(
        op(&app, json!({"op": "redrive", "limit": 1000})).await["moved"],
        1000
    );
    assert_eq!(
        op(&app, json!({"op": "redrive", "confirm": true})).await["moved"],
        1002
    );
}

#[tokio::test]
async fn the_row_is_written_before_the_operation_runs_and_the_trail_is_append_only() {
    let app = spawn_app().await;
    op(&app, json!({"op": "stats"})).await;
    // The listing runs after its own row was written: it sees itself, still started.
    let rows = audit(&app).await;
    assert_eq!(
        (rows[0]["op"].as_str(), rows[0]["status"].as_str()),
        (Some("audit"), Some("started"))
    );
    assert_eq!(rows[1]["status"], "ok");

    // Not even the table's owner changes or removes what was recorded.
    let client = app.pool.get().await.unwrap();
    crate::helpers::assert_refused(
        &client,
        &[
            "UPDATE operation_audit SET principal = 'someone else'",
            "UPDATE operation_audit SET status = 'failed' WHERE status = 'ok'",
            "DELETE FROM operation_audit",
            "TRUNCATE operation_audit",
        ],
    )
    .await;
    // The login and the time are the server's, whatever the client writes.
    client
        .batch_execute(
            "INSERT INTO operation_audit (principal, op, parameters, status, db_login, at)
             VALUES ('p', 'stats', '{}', 'ok', 'someone_else', '2000-01-01')",
        )
        .await
        .unwrap();
    let row = app
        .row("SELECT db_login = session_user, at > now() - interval '1 hour' FROM operation_audit WHERE principal = 'p'")
        .await;
    assert_eq!((row.get::<_, bool>(0), row.get::<_, bool>(1)), (true, true));
    assert_eq!(app.count("SELECT count(*) FROM operation_audit").await, 3);
}

#[test]
fn the_cli_operator_names_the_process_uid_not_only_what_user_claims() {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    let operator = triage::operations::Operator::os_user();
    assert!(
        operator.as_str().ends_with(&format!(" uid {uid}")),
        "{operator:?}"
    );
}

#[tokio::test]
async fn lists_and_limits_of_a_request_are_bounded_and_refused_beyond() {
    let app = spawn_app().await;
    let created = app.post_ticket("kept", "kept").await;
    let id = created.body["id"].as_str().unwrap().to_string();
    let too_many: Vec<String> = std::iter::once(id)
        .chain((0..triage::operations::MAX_ERASE_TICKETS).map(|_| uuid::Uuid::new_v4().to_string()))
        .collect();
    for request in [
        json!({"op": "erase", "ticket_ids": too_many}),
        json!({"op": "audit", "limit": 0}),
        json!({"op": "audit", "limit": triage::operations::MAX_AUDIT_ROWS + 1}),
        json!({"op": "redrive", "limit": -1}),
        json!({"op": "redrive", "limit": triage::operations::MAX_REDRIVE_LIMIT + 1}),
    ] {
        let refused = try_op(&app, request.clone()).await;
        assert!(
            matches!(refused, Err(Error::InvalidRequest(_))),
            "{request}: {refused:?}"
        );
    }
    assert_eq!(
        app.count("SELECT count(*) FROM ticket").await,
        1,
        "nothing erased"
    );
}
