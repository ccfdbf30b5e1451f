//! Prompt injection (OWASP LLM01/LLM05): a corpus of tickets that try to steer the model,
//! each answered by the fake with the off-policy output the attack asks for. Under
//! triage-v5 the ticket reaches the model as JSON data; whatever comes back, the contract
//! rejects every off-policy answer, stores no result, and `last_error` quotes none of it.

use std::time::Duration;

use fake_provider::{Behavior, FakeProvider};
use serde_json::Value;

use crate::helpers::spawn_app_with_fake;

const CORPUS: &str = include_str!("../data/injection-corpus.json");

/// Every string in `answer`, keys included, except the contract's own field names.
fn planted_words(answer: &Value, into: &mut Vec<String>) {
    const FIELDS: [&str; 3] = ["is_urgent", "department", "urgency_score"];
    match answer {
        Value::String(s) => into.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| planted_words(v, into)),
        Value::Object(object) => {
            for (key, value) in object {
                if !FIELDS.contains(&key.as_str()) {
                    into.push(key.clone());
                }
                planted_words(value, into);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn no_injected_answer_passes_the_contract_or_reaches_last_error() {
    let corpus: Vec<Value> = serde_json::from_str(CORPUS).unwrap();
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.versions.prompt = "triage-v5".parse().unwrap();
    })
    .await;
    for (i, case) in corpus.iter().enumerate() {
        let subject = format!("Injection case {i:02}");
        fake.when_contains(&subject, Behavior::Answer(case["answer"].clone()));
        let message = case["message"].as_str().unwrap();
        assert_eq!(app.post_ticket(&subject, message).await.status, 201);
    }
    app.drain(&app.worker(), Duration::from_secs(30)).await;

    assert_eq!(fake.calls().len(), corpus.len(), "one call per ticket");
    for call in fake.calls() {
        let data: Value = serde_json::from_str(&call.ticket_text)
            .expect("under triage-v5 the ticket is sent as one JSON value");
        assert!(data["subject"]
            .as_str()
            .unwrap()
            .starts_with("Injection case"));
    }
    assert_eq!(app.count("SELECT count(*) FROM evaluation_result").await, 0);
    let client = app.pool.get().await.unwrap();
    let rows = client
        .query(
            "SELECT status, error_class, last_error FROM evaluation_outbox ORDER BY id",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), corpus.len());
    for (row, case) in rows.iter().zip(&corpus) {
        let (status, reason, error): (String, String, String) =
            (row.get(0), row.get(1), row.get(2));
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("dead", "contract_violation"),
            "{case}"
        );
        let mut planted = Vec::new();
        planted_words(&case["answer"], &mut planted);
        for word in planted {
            assert!(
                !error.contains(&word),
                "last_error {error:?} quotes {word:?}"
            );
        }
    }
}
