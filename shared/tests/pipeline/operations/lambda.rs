//! The ops Lambda accepts every payload in the runbook and refuses unknown fields and
//! malformed values.

use serde_json::{json, Value};
use triage::operations;

use crate::helpers::{operations::op, spawn_app};

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
            "cascade",
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
            "taxonomy",
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
