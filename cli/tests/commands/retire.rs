//! `triage models retire VERSION`: a stored classifier removed, audited; refused, with a
//! non-zero exit and nothing changed, while the configured cascade names it or when no such
//! classifier is stored. `triage models --json` shows each one's training window.

use serde_json::Value;
use triage::{
    config::Config,
    db,
    pipeline::ingest::{self, NewTicket, Submitter},
};

use super::{json, refused, triage, triage_with};

/// Production tickets as the API ingests them (the offline rules classifier answers them), and
/// the pool they went through.
async fn ingested(url: &str, count: usize) -> (deadpool_postgres::Pool, Vec<String>) {
    let config = Config::from_lookup(|name| (name == "DATABASE_URL").then(|| url.to_string()))
        .expect("a configuration");
    let pool = db::pool(&config.database).expect("a pool");
    let mut ids = Vec::new();
    for i in 0..count {
        // Two departments, so there is something to tell apart.
        let ticket = if i % 2 == 0 {
            NewTicket {
                subject: format!("Invoice {i} charged twice"),
                message: format!("My card was charged twice for invoice {i}; please refund one."),
            }
        } else {
            NewTicket {
                subject: format!("Cannot log in to workspace {i}"),
                message: format!("Locked out of workspace {i}, I need it back immediately!"),
            }
        };
        match ingest::create_ticket(&pool, &config.versions, &ticket, Submitter::LOCAL)
            .await
            .expect("ingested")
        {
            ingest::Outcome::Created(created) => ids.push(created.id.to_string()),
            other => panic!("not created: {other:?}"),
        }
    }
    (pool, ids)
}

#[tokio::test]
async fn models_retire_removes_a_classifier_audited_refused_while_the_configured_cascade_names_it()
{
    let url = testkit::fresh_database().await;
    let migrated = triage(&url, &["migrate"]).await;
    assert!(migrated.status.success(), "{migrated:?}");
    let (pool, ids) = ingested(&url, 6).await;
    let worked = triage(&url, &["worker", "--once"]).await;
    assert!(worked.status.success(), "{worked:?}");

    let from_results = json(&url, &["train", "--from", "results:2", "--json"]).await;
    assert_eq!(from_results["examples"], 6, "{from_results}");
    let version = from_results["version"].as_str().unwrap().to_string();
    let from_set = json(
        &url,
        &["train", "--from", "set:evals/tickets.jsonl:dev", "--json"],
    )
    .await;
    let kept = from_set["version"].as_str().unwrap().to_string();

    // The training window: two days back from the read for results:2, none for a set.
    let models = json(&url, &["models", "--json"]).await;
    let of = |v: &str| {
        models
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["version"] == v)
            .cloned()
            .unwrap_or_else(|| panic!("{v} listed: {models}"))
    };
    let window = of(&version);
    assert!(
        window["trained_from"].is_string() && window["trained_until"].is_string(),
        "{window}"
    );
    let span = format!(
        "SELECT count(*) FROM local_model WHERE version = '{version}' \
         AND trained_until - trained_from BETWEEN interval '2 days' AND interval '2 days 5 min'"
    );
    let client = pool.get().await.unwrap();
    assert_eq!(testkit::count(&client, &span).await, 1, "{window}");
    assert_eq!(of(&kept)["trained_from"], Value::Null);

    // Refused while the configured model version is a cascade naming it: nothing changes.
    let cascade = format!("cascade({version},0.9,gpt-6-luna@medium)");
    let configured = [
        ("TRIAGE_PROVIDER", "openai"),
        ("TRIAGE_MODEL", cascade.as_str()),
    ];
    let out = triage_with(&url, &["models", "retire", &version], &configured).await;
    assert!(!out.status.success(), "not refused: {out:?}");
    let why = String::from_utf8_lossy(&out.stderr);
    assert!(
        why.contains("TRIAGE_MODEL") && why.contains(&version),
        "{why}"
    );
    let models = json(&url, &["models", "--json"]).await;
    assert_eq!(
        models.as_array().unwrap().len(),
        2,
        "nothing removed: {models}"
    );

    // An unknown version: refused naming it.
    let unknown = refused(&url, &["models", "retire", "local-0123456789ab"]).await;
    assert!(unknown.contains("local-0123456789ab"), "{unknown}");

    let retired = json(&url, &["models", "retire", &version, "--json"]).await;
    assert_eq!(
        (&retired["version"], &retired["tickets"]),
        (&Value::from(version.as_str()), &Value::from(6)),
        "{retired}"
    );
    let models = json(&url, &["models", "--json"]).await;
    let left: Vec<&Value> = models
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["version"])
        .collect();
    assert_eq!(left, [&Value::from(kept.as_str())]);

    // Audited: the retire, and the two refusals before it.
    let trail = json(&url, &["audit", "--json"]).await;
    let runs: Vec<(&str, &str)> = trail
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["parameters"]["action"]["retire"].is_object())
        .map(|r| {
            (
                r["parameters"]["action"]["retire"]["version"]
                    .as_str()
                    .unwrap(),
                r["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            (version.as_str(), "ok"),
            ("local-0123456789ab", "refused"),
            (version.as_str(), "refused"),
        ]
    );

    // Erasing a ticket it learnt from names no classifier: the retired one is gone.
    let erased = json(&url, &["erase", &ids[0], "--json"]).await;
    assert_eq!(erased["tickets"], 1, "{erased}");
    assert_eq!(
        erased["classifiers_trained_on"],
        Value::Array(vec![]),
        "{erased}"
    );
    let table = triage(&url, &["models", "retire", &kept]).await;
    assert!(table.status.success(), "{table:?}");
    assert!(String::from_utf8_lossy(&table.stdout).contains(&kept));
}
