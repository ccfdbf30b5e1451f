//! The cascade (docs/cascade.md): a local classifier trained by `triage train` answers what it
//! is sure of, the large model the rest.
//! - `audit`: a random share of would-be-local answers audited by the large model, live
//!   precision with its exact interval, the suspension and its resume.
//! - `answers`: train and models; local answers with no call; a cascade through reprocess,
//!   shadow diff and promote like any version; erasure and the desk's corrections in training.
//! - `provisional`: while the provider cannot be asked, a provisional local answer, announced
//!   once, which the final answer replaces (a second event).
//! - `eval`: an eval of a cascade reports its local share and its costs exactly; promote
//!   judges it like any version.
//! - `thresholds`: the threshold sweep on dev, each point an eval run, drawn on the Quality page.
//! - `retire`: each classifier's training window; `models retire`, refused while a live cascade
//!   names it; erasure names a retired one no more.
//! - `retrain`: `models switch` and the gated `retrain` keep a configured cascade fresh.
//! - `targets`: a target precision (`train --precision`, `cascade(…,p0.9,…)`): thresholds
//!   derived per department, stored with the classifier, used by the worker.
//! - `by_time`: `eval --by-time`, the cascade judged on production traffic split by time.
//! - `caps`: each owner's share of a training source, never below a floor; each giver's share.

mod answers;
mod audit;
mod by_time;
pub(crate) mod caps;
mod eval;
mod provisional;
mod retire;
mod retrain;
mod targets;
mod thresholds;

use std::sync::Arc;

use serde_json::json;
use triage::{config::Config, pipeline::cascade::models, providers::classifier::LocalModel};

use crate::helpers::{operations::op_cli, TestApp};

/// A classifier trained on the dev split of `set` (`shipped` or a set file's path): its
/// version and the model itself. Trained as the CLI does, which alone reads a file.
async fn trained(app: &TestApp, set: &str) -> (String, Arc<LocalModel>) {
    let trained = op_cli(
        app,
        json!({"op": "train", "from": [format!("set:{set}:dev")]}),
    )
    .await;
    let version = trained["version"].as_str().unwrap().to_string();
    let client = app.pool.get().await.unwrap();
    let model = models::load(&client, &version).await.unwrap().unwrap();
    (version, model)
}

/// The same database, with `model` as the configured model version.
fn configured(app: &TestApp, model: &str, adjust: impl FnOnce(&mut Config)) -> TestApp {
    let mut config = (*app.config).clone();
    config.versions.model = model.parse().unwrap();
    adjust(&mut config);
    TestApp {
        pool: app.pool.clone(),
        config: Arc::new(config),
    }
}

/// Words of each of policy-v1's departments for [`desk_ticket`]: a desk whose tickets a
/// classifier can learn.
const WORDS: [(&str, [&str; 8]); 5] = [
    (
        "billing",
        [
            "invoice", "refund", "charged", "payment", "receipt", "vat", "card", "twice",
        ],
    ),
    (
        "technical",
        [
            "error", "crash", "timeout", "bug", "api", "server", "broken", "500",
        ],
    ),
    (
        "account",
        [
            "password", "login", "username", "locked", "profile", "email", "2fa", "reset",
        ],
    ),
    (
        "sales",
        [
            "pricing", "quote", "discount", "plan", "upgrade", "demo", "seats", "trial",
        ],
    ),
    (
        "general",
        [
            "hello",
            "question",
            "office",
            "hours",
            "feedback",
            "thanks",
            "newsletter",
            "info",
        ],
    ),
];

/// The `i`th ticket of department `d` (an index of [`WORDS`]): its subject, message, department
/// and urgency (one in four is urgent, and says so).
fn desk_ticket(d: usize, i: usize) -> (String, String, String, bool) {
    let (department, words) = WORDS[d];
    let pick = |k: usize| words[(i * 7 + k * 3) % words.len()];
    let urgent = i.is_multiple_of(4);
    let message = format!(
        "{} {} {} and {} again, ticket {i}{}",
        pick(0),
        pick(1),
        pick(2),
        pick(3),
        if urgent {
            ": urgent, everything is down now"
        } else {
            ""
        }
    );
    (
        format!("{} {}", pick(4), pick(5)),
        message,
        department.to_string(),
        urgent,
    )
}

/// `per_department` tickets of each department from the `from`th on, as JSONL rows of `split`.
fn desk_set(from: usize, per_department: usize, split: &str) -> String {
    let mut out = String::new();
    for i in from..from + per_department {
        for d in 0..WORDS.len() {
            let (subject, message, department, is_urgent) = desk_ticket(d, i);
            let row = json!({"id": format!("{department}-{i}"), "subject": subject,
                             "message": message, "department": department,
                             "is_urgent": is_urgent, "split": split});
            out += &format!("{row}\n");
        }
    }
    out
}

/// Tickets no department's words describe: a classifier is unsure of them.
fn vague_tickets(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("Note {i}"),
                format!("Something came up with item {i}, see the attached."),
            )
        })
        .collect()
}
