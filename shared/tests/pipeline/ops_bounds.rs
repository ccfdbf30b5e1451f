//! What the ops Lambda refuses before it reads or queues anything (issue "Round four", items 2
//! to 4): local files, unbounded lists, an unconfirmed billed eval; and a training made to fit
//! its memory (issue 39, item 4).

use serde_json::{json, Value};
use triage::operations::{self, Operator};

use crate::helpers::{spawn_app, TestApp};

async fn as_lambda(app: &TestApp, memory_mb: u32, payload: Value) -> triage::Result<Value> {
    let request: operations::Request = serde_json::from_value(payload).expect("payload parses");
    let operator =
        Operator::lambda("arn:aws:lambda:test:ops", "request-1").with_memory_mb(memory_mb);
    operations::run(&app.pool, &app.config, request, &operator)
        .await
        .map(|outcome| serde_json::to_value(outcome).unwrap())
}

fn refusal(outcome: triage::Result<Value>) -> (String, String) {
    match outcome {
        Err(triage::Error::InvalidRequest(e)) => (e.field, e.reason),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn the_ops_lambda_reads_no_local_file_and_says_nothing_of_one() {
    let app = spawn_app().await;
    let existing = std::env::current_exe().unwrap();
    let mut answers = Vec::new();
    for path in [existing.to_str().unwrap(), "/no/such/file.jsonl"] {
        let eval = as_lambda(&app, 256, json!({"op": "eval", "set": path})).await;
        let train = as_lambda(
            &app,
            256,
            json!({"op": "train", "from": [format!("set:{path}:dev")]}),
        )
        .await;
        answers.push((refusal(eval), refusal(train)));
    }
    // The same answer for a file that exists and one that does not: nothing is told of it.
    assert_eq!(answers[0], answers[1]);
    let ((field, reason), (train_field, _)) = &answers[0];
    assert_eq!((field.as_str(), train_field.as_str()), ("set", "from"));
    assert!(reason.contains("no local files"), "{reason}");
    assert!(
        !reason.contains("bytes") && !reason.contains("os error"),
        "{reason}"
    );
    assert_eq!(app.count("SELECT count(*) FROM eval_request").await, 0);
}

#[tokio::test]
async fn eval_and_train_lists_are_bounded() {
    let app = spawn_app().await;
    let versions: Vec<String> = (0..9).map(|_| "triage-v5".to_string()).collect();
    let eval = json!({"op": "eval", "set": "shipped", "versions": versions});
    let (field, reason) = refusal(as_lambda(&app, 256, eval).await);
    assert_eq!(field, "versions", "{reason}");
    let sources: Vec<String> = (1..=9).map(|d| format!("results:{d}")).collect();
    let train = json!({"op": "train", "from": sources});
    let (field, reason) = refusal(as_lambda(&app, 256, train).await);
    assert_eq!(field, "from", "{reason}");
    assert_eq!(app.count("SELECT count(*) FROM eval_request").await, 0);
}

#[tokio::test]
async fn an_eval_that_queues_over_a_thousand_billed_jobs_shows_the_count_and_needs_confirm() {
    let app = spawn_app().await;
    // Two billed versions over the shipped set: a provider call per distinct content and
    // version (the set's duplicates share one).
    let versions = ["triage-v5/gpt-6-luna@medium", "triage-v6/gpt-6-luna@medium"];
    let eval = json!({"op": "eval", "set": "shipped", "versions": versions});
    let (field, reason) = refusal(as_lambda(&app, 256, eval.clone()).await);
    assert_eq!(field, "confirm");
    let jobs: i64 = reason
        .split_whitespace()
        .skip_while(|w| *w != "queue")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {reason}"));
    assert!(jobs > 1000 && reason.contains("billed jobs"), "{reason}");
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM eval_request").await, 0);
    // Confirmed, it queues them.
    let mut confirmed = eval;
    confirmed["confirm"] = true.into();
    as_lambda(&app, 256, confirmed)
        .await
        .expect("confirmed eval queues");
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox").await,
        jobs
    );
    // The offline rules bill nothing: no confirmation needed however large.
    let rules = json!({"op": "eval", "set": "shipped", "versions": ["triage-v5/rules@offline"]});
    as_lambda(&app, 256, rules)
        .await
        .expect("rules need no confirmation");
}

#[tokio::test]
async fn a_training_beyond_the_functions_memory_reads_the_newest_its_budget_holds_and_says_what_it_left_out(
) {
    let app = spawn_app().await;
    // 300 answered tickets of 20,000 characters, a minute apart: 6 MB of text. A 42 MB function
    // gives a training about 1.2 MB for its examples (25 MB of its 60 % are the classifier's
    // own): some 140 of them, 8 KiB of each message (what the classifier reads) and their labels.
    app.exec(
        "WITH g AS (SELECT gen_random_uuid() AS id, i FROM generate_series(1, 300) AS i),
         t AS (
             INSERT INTO ticket (id, subject, message)
             SELECT id, 'subject ' || i, left(repeat('refund ' || i || ' was charged twice ', 1000), 20000)
             FROM g RETURNING id)
         INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department,
                                        urgency_score, model_version, prompt_version, policy_version,
                                        computed_at)
         SELECT md5(g.id::text), g.id, CASE WHEN i % 3 = 0 THEN 0.9 ELSE 0.1 END,
                CASE WHEN i % 2 = 0 THEN 'billing' ELSE 'technical' END, 0.1, 'gpt-6-luna@medium',
                'triage-v5', 'policy-v1', now() - make_interval(mins => i)
         FROM g JOIN t USING (id)",
    )
    .await;
    let train = json!({"op": "train", "from": ["results:30"]});
    let trained = as_lambda(&app, 42, train.clone())
        .await
        .expect("trains within its memory, not refused");
    let read = trained["sources"][0]["examples"].as_u64().unwrap();
    assert!((50..300).contains(&read), "{trained}");
    assert_eq!(trained["examples"], read);
    let left_out = &trained["sources"][0]["left_out"];
    assert_eq!(
        left_out,
        &json!({"memory": 300 - read, "held": 0, "owner_cap": 0, "giver_cap": 0, "row_cap": 0})
    );
    let budget = &trained["budget"];
    assert_eq!(
        (&budget["of"], &budget["memory_mb"]),
        (&json!("ops function"), &json!(42))
    );
    let held = trained["held_bytes"].as_u64().unwrap();
    assert!(
        held <= budget["bytes"].as_u64().unwrap() && held > read * 8192,
        "{trained}"
    );
    // The newest were read: every ticket it learnt from is newer than every one it left out.
    let version = trained["version"].as_str().unwrap();
    let newest_left_out_is_older = format!(
        "SELECT count(*) FROM evaluation_result r
         WHERE r.ticket_id NOT IN (SELECT ticket_id FROM local_model_ticket WHERE version = '{version}')
           AND r.computed_at > (SELECT min(r2.computed_at) FROM evaluation_result r2
                                JOIN local_model_ticket m ON m.ticket_id = r2.ticket_id
                                WHERE m.version = '{version}')"
    );
    assert_eq!(app.count(&newest_left_out_is_older).await, 0);
    // The audit trail says so too.
    let audited = app
        .count(
            "SELECT (result->'sources'->0->'left_out'->>'memory')::int8 FROM operation_audit
             WHERE op = 'train' AND status = 'ok'",
        )
        .await;
    assert_eq!(audited as u64, 300 - read);
    // Where the memory is (a larger function), all of it trains, nothing left out.
    let all = as_lambda(&app, 3008, train).await.expect("fits in 3 GB");
    assert_eq!(all["examples"], 300, "{all}");
    assert_eq!(all["sources"][0]["left_out"]["memory"], 0);
}

#[tokio::test]
async fn an_eval_may_choose_the_interactive_lane_and_so_the_online_tier() {
    let app = spawn_app().await;
    let eval = json!({"op": "eval", "set": "shipped", "split": "test", "lane": "interactive"});
    as_lambda(&app, 256, eval).await.expect("eval queues");
    let lanes = app
        .count("SELECT count(DISTINCT lane) FROM evaluation_outbox WHERE lane = 'interactive'")
        .await;
    let bulk = app
        .count("SELECT count(*) FROM evaluation_outbox WHERE lane = 'bulk'")
        .await;
    assert_eq!((lanes, bulk), (1, 0));
}

/// The ops payload carries the taxonomy itself; a path is refused like a set's, unread.
#[tokio::test]
async fn the_ops_lambda_stores_a_taxonomy_given_itself_and_refuses_a_path() {
    let app = spawn_app().await;
    let existing = std::env::current_exe().unwrap();
    for path in [existing.to_str().unwrap(), "/no/such/taxonomy.json"] {
        let add = json!({"op": "taxonomy", "action": {"add": {"file": path}}});
        let (field, reason) = refusal(as_lambda(&app, 256, add).await);
        assert_eq!(field, "file", "{reason}");
        assert!(reason.contains("no local files"), "{reason}");
    }
    assert_eq!(app.count("SELECT count(*) FROM taxonomy").await, 0);

    let taxonomy = json!({"name": "shop", "departments": [
        {"name": "returns", "description": "Sending an order back."},
        {"name": "delivery", "description": "Where an order is.", "zendesk_group_id": 360002}],
        "urgent": "The customer cannot pay.", "urgent_threshold": 0.5});
    let add = json!({"op": "taxonomy", "action": {"add": {"file": taxonomy}}});
    let added = as_lambda(&app, 256, add).await.unwrap();
    let version = added["policy_version"].as_str().unwrap().to_string();
    assert!(version.starts_with("shop-") && version.len() == "shop-".len() + 12);
    assert_eq!(
        (&added["departments"], &added["new"]),
        (&json!(2), &json!(true))
    );
    let listed = as_lambda(&app, 256, json!({"op": "taxonomy", "action": "list"}))
        .await
        .unwrap();
    assert_eq!(listed[0]["policy_version"], version.as_str(), "{listed}");
    let show = json!({"op": "taxonomy", "action": {"show": {"version": version}}});
    let shown = as_lambda(&app, 256, show).await.unwrap();
    assert_eq!(
        shown["departments"][1]["zendesk_group_id"], 360002,
        "{shown}"
    );
    assert_eq!(shown["urgent"], "The customer cannot pay.");
}
