//! The prompt registry: a worker records the text hash of every prompt version it carries
//! and refuses to run when the text behind one changed.

use std::time::Instant;

use fake_provider::FakeProvider;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use triage::providers::{Policy, Prompt};

use crate::helpers::spawn_app_with_fake;

use super::post;

fn prompt_hash(version: &str) -> String {
    let prompt = Prompt::load(version, &Policy::load("policy-v1").unwrap()).unwrap();
    hex::encode(Sha256::digest(prompt.text.as_bytes()))
}

#[tokio::test]
async fn a_worker_records_the_text_hash_of_every_prompt_version_it_carries() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    app.run_worker_once(&app.worker()).await;
    let client = app.pool.get().await.unwrap();
    let recorded: Vec<(String, String)> = client
        .query(
            "SELECT prompt_version, sha256 FROM prompt_registry ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let expected: Vec<(String, String)> = Prompt::known_versions()
        .map(|v| (v.to_string(), prompt_hash(v)))
        .collect();
    assert_eq!(recorded, expected);
    // A second worker with the same texts runs.
    app.run_worker_once(&app.worker()).await;
}

#[tokio::test]
async fn a_worker_refuses_to_run_when_the_text_behind_a_prompt_version_changed() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    // An earlier build ran triage-v3 with another text.
    app.exec("INSERT INTO prompt_registry (prompt_version, sha256) VALUES ('triage-v3', encode(sha256('an earlier text'), 'hex'))",
    )
    .await;
    post(&app, "Waiting").await;

    let worker = app.worker();
    for _ in 0..2 {
        let deadline = Instant::now() + app.config.worker.invocation_budget;
        let error = worker
            .run_invocation(deadline, &CancellationToken::new())
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, triage::Error::Config(_)), "{message}");
        assert!(
            message.contains("triage-v3") && message.contains("new version"),
            "{message}"
        );
    }
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0"
        )
        .await,
        1,
        "nothing claimed"
    );
    assert!(fake.calls().is_empty(), "nothing called");
}
