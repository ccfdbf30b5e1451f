//! The ops Lambda as Lambda runs it: the real binary, operation payloads through the Runtime
//! API emulator, a real PostgreSQL.

use std::time::Duration;

use serde_json::json;
use testkit::lambda::{Function, RuntimeApi};
use triage::{
    config::Config,
    db,
    pipeline::ingest::{create_ticket, NewTicket, Submitter},
    telemetry::NAMESPACE,
};

const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn stats_answer_with_the_queue_and_count_the_operation_and_a_bad_request_is_an_invalid_request(
) {
    let url = testkit::fresh_database().await;
    let config = Config::local(&url);
    db::migrate(&config.database).await.unwrap();
    let pool = db::pool(&config.database).unwrap();
    let (subject, message) = ("Zanzibar invoice", "Quokka account locked since Tuesday");
    let ticket = NewTicket {
        subject: subject.into(),
        message: message.into(),
    };
    create_ticket(&pool, &config.versions, &ticket, Submitter::LOCAL)
        .await
        .unwrap();
    let runtime = RuntimeApi::start().await;
    let function = Function::spawn(
        env!("CARGO_BIN_EXE_triage-ops"),
        &runtime,
        [("DATABASE_URL", &url)],
    );

    let stats = runtime.invoke(json!({"op": "stats"}), TIMEOUT).await;
    let health = stats.result.expect("stats answered");
    assert_eq!(
        (&health["pending"], &health["done"]),
        (&json!(1), &json!(0))
    );
    let emf = function.stdout().wait_for("ops.run").await;
    assert!(emf.contains(r#""op":"stats""#), "{emf}");
    function.assert_telemetry(&stats.request_id, NAMESPACE, &[subject, message]);

    // A prompt version this build does not have: refused before anything is written.
    let refused = runtime
        .invoke(
            json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v99"}),
            TIMEOUT,
        )
        .await;
    let error = refused
        .result
        .expect_err("an unknown prompt version is refused");
    // The operator's mistake, not the deployment's: its own error type.
    assert_eq!(error.error_type, "InvalidRequest", "{error:?}");
    assert!(error.error_message.contains("triage-v99"), "{error:?}");
    let client = pool.get().await.unwrap();
    let jobs: i64 = client
        .query_one("SELECT count(*) FROM evaluation_outbox", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(jobs, 1, "nothing was queued");

    // A lane that is neither interactive nor bulk: refused as the payload is read, so the
    // dead letter stays dead (and, like any payload that does not parse, nothing is audited).
    client
        .execute(
            "UPDATE evaluation_outbox SET status = 'dead', finished_at = now(), \
             error_class = 'timeout'",
            &[],
        )
        .await
        .unwrap();
    let refused_lane = runtime
        .invoke(
            json!({"op": "redrive", "spread": "0s", "lane": "fast"}),
            TIMEOUT,
        )
        .await;
    let error = refused_lane.result.expect_err("an unknown lane is refused");
    assert!(
        error
            .error_message
            .contains(r#"lane: "fast" is not a lane: interactive or bulk"#),
        "{error:?}"
    );
    let dead: i64 = client
        .query_one(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(dead, 1, "nothing was redriven");

    // Both runs are in the audit trail, named by the function and the invocation.
    let trail = runtime.invoke(json!({"op": "audit"}), TIMEOUT).await;
    let trail = trail.result.expect("audit answered");
    let rows: Vec<(&str, &str, &str)> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let field = |name: &str| r[name].as_str().unwrap();
            (field("op"), field("status"), field("principal"))
        })
        .collect();
    // The listing's own row first: written before it ran, still started.
    assert_eq!(rows.len(), 3, "{trail}");
    assert_eq!((rows[0].0, rows[0].1), ("audit", "started"));
    assert_eq!((rows[1].0, rows[1].1), ("reprocess", "refused"));
    assert!(rows[1].2.contains(&refused.request_id), "{trail}");
    assert_eq!((rows[2].0, rows[2].1), ("stats", "ok"));
    assert!(rows[2].2.starts_with("lambda arn:aws:lambda:"), "{trail}");
    function.print_init_and_size(&runtime).await;
}
