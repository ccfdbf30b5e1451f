//! The cascade (docs/cascade.md): a local classifier trained by `triage train` answers what it
//! is sure of, the large model the rest.
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

mod answers;
mod eval;
mod provisional;
mod retire;
mod retrain;
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
