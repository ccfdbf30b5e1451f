//! `triage eval` and the promote gate on real PostgreSQL, with the fake provider's
//! classifier mode answering from the set's labels at a known error rate (docs/quality.md).
//! - `reports`: the exact figures of an eval run, its families, intervals and baseline.
//! - `promote`: the promote gate: a worse version refused, a better one accepted, force
//!   audited.
//! - `running`: how eval work runs: apart from production's stats and tickets, stopped and
//!   continued without paying twice, concluded by the sweeper when nobody waits.

mod csv;
mod promote;
mod reports;
mod running;

use std::{path::Path, time::Duration};

use fake_provider::{classifier::Classifier, FakeProvider};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use triage::{operations, pipeline::worker, quality::Watch};

use crate::helpers::TestApp;

const DEPARTMENTS: [&str; 5] = ["billing", "technical", "account", "sales", "general"];
/// The configured model of `use_fake`, as the fake sees it in a request.
const MODEL: &str = "gpt-6-luna";
const RATE: f64 = 0.25;

/// 60 labelled rows, every department and both urgencies, half in each split; 20 scenario
/// families of 3 rows (rows i, i + 20, i + 40: one label, one split).
fn labelled_set() -> String {
    (0..60)
        .map(|i| {
            json!({
                "id": format!("t{i}"),
                "subject": format!("Ticket {i} about {}", DEPARTMENTS[i % 5]),
                "message": format!("Message number {i}: please look at this ({}).", i * 7 % 11),
                "department": DEPARTMENTS[i % 5],
                "is_urgent": i % 3 == 0,
                "split": if i % 2 == 0 { "test" } else { "dev" },
                "family": format!("f{}", i % 20),
            })
            .to_string()
                + "\n"
        })
        .collect()
}

pub struct EvalSet {
    _dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
    pub text: String,
}

pub fn write_set() -> EvalSet {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("set.jsonl");
    let text = labelled_set();
    std::fs::write(&path, &text).unwrap();
    EvalSet {
        _dir: dir,
        path,
        text,
    }
}

pub async fn fake_classifier(set: &EvalSet) -> FakeProvider {
    let fake = FakeProvider::start().await;
    let classifier = Classifier::from_jsonl(&set.text, RATE)
        .unwrap()
        .with_rate("gpt-good", 0.02)
        .with_rate("gpt-bad", 0.45)
        // A little worse than the configured model's 0.25: on 10 families, noise.
        .with_rate("gpt-noisy", 0.28);
    fake.classify_from_labels(classifier);
    fake
}

/// `triage eval` as the CLI runs it: the operation waits while a worker answers.
pub async fn evaluate(app: &TestApp, set: &Path, split: &str, versions: &[&str]) -> Value {
    let payload = json!({"op": "eval", "set": set, "split": split, "versions": versions});
    waiting(app, payload).await.expect("eval succeeds")
}

/// An operation as the CLI runs `triage eval`: it waits while a worker answers its jobs.
pub async fn waiting(app: &TestApp, payload: Value) -> triage::Result<Value> {
    let request: operations::Request = serde_json::from_value(payload).unwrap();
    let working = CancellationToken::new();
    let watch = Watch {
        wait: true,
        stop: CancellationToken::new(),
        progress: None,
    };
    let operator = operations::Operator::os_user();
    let w = app.worker();
    let evaluation = async {
        let outcome =
            operations::run_with(&app.pool, &app.config, request, &operator, &watch).await;
        working.cancel();
        outcome
    };
    let (outcome, worked) = tokio::join!(
        evaluation,
        worker::run_until_stopped(&w, Duration::from_millis(20), working.clone())
    );
    worked.unwrap();
    Ok(serde_json::to_value(outcome?).unwrap())
}
