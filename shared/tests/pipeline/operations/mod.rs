//! Operations (docs/runbook.md) through `ops::run`, fed the same JSON payloads the ops Lambda
//! receives: reprocess, shadow diff, promotion, redrive, and the prompt registry.
//! - `reprocess`: reprocess: new keys, since, dry runs, spread, pages, refusals.
//! - `shadow`: the shadow diff after a reprocess, and of versions with nothing in common.
//! - `promotion`: promotion and what GET shows after it.
//! - `redrive`: redrive of dead letters: attempts reset, filters, batches.
//! - `prompts`: the prompt registry: the text hash of every prompt version.
//! - `lambda`: the ops Lambda's payloads, as the runbook writes them.

mod lambda;
mod promotion;
mod prompts;
mod redrive;
mod reprocess;
mod shadow;

use std::time::Duration;

use fake_provider::Behavior;
use serde_json::{json, Value};

use crate::helpers::TestApp;

const DRAIN: Duration = Duration::from_secs(60);

fn tickets(prefix: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("{prefix} {i}"), format!("message {i}")))
        .collect()
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

async fn post(app: &TestApp, subject: &str) -> String {
    let created = app.post_ticket(subject, "body of the ticket").await;
    assert_eq!(created.status, 201);
    created.body["id"].as_str().unwrap().to_string()
}
