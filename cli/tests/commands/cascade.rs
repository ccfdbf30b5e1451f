//! `triage train` and `triage models`.

use serde_json::Value;

use super::{json, refused, triage};

#[tokio::test]
async fn train_stores_a_classifier_by_content_and_models_lists_it() {
    let url = testkit::fresh_database().await;
    let migrated = triage(&url, &["migrate"]).await;
    assert!(migrated.status.success(), "{migrated:?}");
    let models = json(&url, &["models", "--json"]).await;
    assert_eq!(models, Value::Array(vec![]), "none before training");

    let from_dev = ["train", "--from", "set:evals/tickets.jsonl:dev", "--json"];
    let trained = json(&url, &from_dev).await;
    let version = trained["version"].as_str().expect("a version").to_string();
    let hex = version.strip_prefix("local-").expect("local-<hex>");
    assert!(
        !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "{version}"
    );
    assert_eq!(trained["new"], true);
    assert!(trained["examples"].as_u64().unwrap() > 0, "{trained}");
    let bytes = trained["bytes"].as_u64().unwrap();
    assert!(bytes > 0 && bytes <= 5 * 1024 * 1024, "{bytes} bytes");

    // The same examples make the same artefact: stored once, under the same version.
    let again = json(&url, &from_dev).await;
    assert_eq!(
        (&again["version"], &again["new"]),
        (&trained["version"], &Value::Bool(false))
    );

    let models = json(&url, &["models", "--json"]).await;
    let listed = models.as_array().expect("a list");
    assert_eq!(listed.len(), 1, "{models}");
    assert_eq!(listed[0]["version"], version.as_str());
    assert_eq!(listed[0]["bytes"].as_u64(), Some(bytes));
    let table = triage(&url, &["models"]).await;
    assert!(String::from_utf8_lossy(&table.stdout).contains(&version));

    // A test family never trains it; nor does an unknown source, nor one with no examples.
    let test_split = refused(&url, &["train", "--from", "set:evals/tickets.jsonl:test"]).await;
    assert!(test_split.contains("never trains"), "{test_split}");
    let unknown = refused(&url, &["train", "--from", "tickets:7"]).await;
    assert!(unknown.contains("tickets:7"), "{unknown}");
    let nothing = refused(&url, &["train", "--from", "results:1"]).await;
    assert!(nothing.contains("example"), "{nothing}");
    let models = json(&url, &["models", "--json"]).await;
    assert_eq!(models.as_array().unwrap().len(), 1, "nothing more stored");
}
