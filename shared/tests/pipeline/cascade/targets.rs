//! A target, not a threshold (issue 39, item 2): `triage train --precision P` derives the
//! thresholds keeping P per department by cross-fitting, stores them with the classifier
//! (`triage models` lists them), and a cascade naming `pP` is answered locally exactly where
//! those thresholds say; a target no thresholds were derived for is refused.

use std::time::Duration;

use fake_provider::FakeProvider;
use serde_json::json;
use triage::{pipeline::cascade::models, providers::classifier::target::Thresholds, Error};

use super::{configured, desk_set, desk_ticket, vague_tickets};
use crate::{
    helpers::operations::{op, op_cli, try_op},
    helpers::{spawn_app_with_fake, TestApp},
};

async fn answered_by(app: &TestApp, subject: &str, message: &str, model_version: &str) -> String {
    let row = app
        .row(&format!(
            "SELECT r.answered_by FROM evaluation_result r JOIN ticket t ON t.id = r.ticket_id \
             WHERE t.subject = '{subject}' AND t.message = '{message}' \
               AND r.model_version = '{model_version}'"
        ))
        .await;
    row.get(0)
}

#[tokio::test]
async fn a_cascade_named_by_a_target_precision_answers_locally_where_the_derived_thresholds_say() {
    let fake = FakeProvider::start().await;
    // A small pool: a loaded machine times out a burst of new connections.
    let app = spawn_app_with_fake(&fake, |c| c.database.pool_size = 4).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("desk.jsonl");
    std::fs::write(&path, desk_set(0, 40, "dev")).unwrap();
    let from = format!("set:{}:dev", path.display());
    let trained = op_cli(
        &app,
        json!({"op": "train", "from": [from], "precision": 0.9}),
    )
    .await;
    let local = trained["version"].as_str().unwrap().to_string();
    let thresholds: Thresholds = serde_json::from_value(trained["thresholds"].clone()).unwrap();
    assert_eq!((thresholds.target, thresholds.folds), (0.9, 5), "{trained}");
    // Every example answered out of fold, by a classifier that never saw it.
    assert_eq!(thresholds.rows, 200, "{trained}");
    assert!(thresholds.precision.unwrap() >= 0.9, "{trained}");
    assert_eq!(thresholds.curve.len(), 21);
    assert!(!thresholds.departments.is_empty(), "{trained}");
    // Stored with the classifier, listed by triage models.
    let listed = op(&app, json!({"op": "models"})).await;
    assert_eq!(listed[0]["targets"][0]["target"], 0.9, "{listed}");
    assert_eq!(
        app.count("SELECT count(*) FROM local_model_target").await,
        1
    );

    // A target no thresholds were derived for is refused where a cascade is named.
    let unknown = format!("cascade({local},p0.95,gpt-6-luna@medium)");
    let prompt = app.config.versions.prompt.as_str().to_string();
    let reprocess = |model: &str| {
        json!({"op": "reprocess", "since": "1h", "prompt_version": prompt,
               "model_version": model, "dry_run": true})
    };
    let refused = try_op(&app, reprocess(&unknown)).await;
    match refused {
        Err(Error::InvalidRequest(e)) => assert!(e.reason.contains("--precision 0.95"), "{e}"),
        other => panic!("not refused: {other:?}"),
    }
    let cascade = format!("cascade({local},p0.9,gpt-6-luna@medium)");
    op(&app, reprocess(&cascade)).await;

    // The worker: local exactly where the derived thresholds say, per department.
    let app = configured(&app, &cascade, |_| {});
    let mut tickets: Vec<(String, String)> = (100..104)
        .flat_map(|i| (0..5).map(move |d| desk_ticket(d, i)))
        .map(|(s, m, _, _)| (s, m))
        .collect();
    tickets.extend(vague_tickets(10));
    app.ingest_many(&tickets).await;
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let client = app.pool.get().await.unwrap();
    let model = models::load(&client, &local).await.unwrap().unwrap();
    let (mut locally, mut called) = (0, 0);
    for (subject, message) in &tickets {
        let answer = model.predict(subject, message);
        let sure = thresholds.answers(&answer.department, answer.confidence);
        let by = answered_by(&app, subject, message, &cascade).await;
        assert_eq!(
            by,
            if sure { "local" } else { "model" },
            "{subject}: {answer:?}"
        );
        if sure {
            locally += 1;
        } else {
            called += 1;
        }
    }
    assert!(
        locally > 0 && called > 0,
        "{locally} local, {called} called"
    );
    assert_eq!(fake.billed_calls().len(), called);

    // The Quality page shows the configured cascade's thresholds and their curve.
    let page = crate::console::console_page(&app, "/admin/quality").await;
    assert!(
        page.contains(&format!(r#"data-target="{cascade}@p0.9""#)),
        "{page}"
    );
    assert!(
        page.contains("Risk–coverage out of fold, on its training examples"),
        "{page}"
    );
}
