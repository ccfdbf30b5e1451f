//! Judged as production runs (issue 39, item 1): `triage eval --by-time` trains a candidate on
//! the results and labellers' feedback before the split and judges it on the tickets after
//! it, beside the large model's stored answers, with no provider call; the truth is the desk's
//! label where there is one, else the large model's answer, and the figures say which.

use std::time::Duration;

use fake_provider::{classifier::Classifier, FakeProvider};
use serde_json::{json, Value};

use super::{desk_set, desk_ticket};
use crate::helpers::{operations::op, spawn_app_with_fake, TestApp};

/// Moves every ticket, answer and label stored so far `days` days back.
async fn age(app: &TestApp, days: i32) {
    let client = app.pool.get().await.unwrap();
    for table in [
        "UPDATE ticket SET created_at = created_at - make_interval(days => $1)",
        "UPDATE evaluation_result SET computed_at = computed_at - make_interval(days => $1)",
        "UPDATE ticket_feedback SET created_at = created_at - make_interval(days => $1)",
    ] {
        client.execute(table, &[&days]).await.unwrap();
    }
}

/// The desk's labels (an operator's batch: a labeller's) for the tickets of `rows`.
async fn label(app: &TestApp, rows: &[(String, String, String, bool)]) {
    let mut items = Vec::new();
    for (subject, message, department, urgent) in rows {
        let id: String = app
            .row(&format!(
                "SELECT id::text FROM ticket WHERE subject = '{subject}' AND message = '{message}'"
            ))
            .await
            .get(0);
        items.push(json!({"ticket_id": id, "department": department, "is_urgent": urgent}));
    }
    op(app, json!({"op": "feedback", "items": items})).await;
}

fn split(app_payload: Value) -> Value {
    let mut payload = json!({"op": "eval", "by_time": true, "days": 7});
    for (k, v) in app_payload.as_object().unwrap() {
        payload[k] = v.clone();
    }
    payload
}

#[tokio::test]
async fn a_time_split_trains_before_the_split_judges_after_it_and_calls_no_provider() {
    let before: Vec<_> = (0..30)
        .flat_map(|i| (0..5).map(move |d| desk_ticket(d, i)))
        .collect();
    let after: Vec<_> = (200..208)
        .flat_map(|i| (0..5).map(move |d| desk_ticket(d, i)))
        .collect();
    let fake = FakeProvider::start().await;
    let labels = desk_set(0, 30, "dev") + &desk_set(200, 8, "test");
    fake.classify_from_labels(Classifier::from_jsonl(&labels, 0.2).unwrap());
    // A small pool: a loaded machine times out a burst of new connections.
    let app = spawn_app_with_fake(&fake, |c| c.database.pool_size = 4).await;
    let texts = |rows: &[(String, String, String, bool)]| -> Vec<(String, String)> {
        rows.iter()
            .map(|(s, m, _, _)| (s.clone(), m.clone()))
            .collect()
    };

    // Twenty days ago: 150 tickets answered by the model, 5 of them labelled by the desk.
    app.ingest_many(&texts(&before)).await;
    app.drain(&app.worker(), Duration::from_secs(30)).await;
    label(&app, &before[..5]).await;
    age(&app, 20).await;
    // Today: 40 more, 10 of them labelled by the desk.
    app.ingest_many(&texts(&after)).await;
    app.drain(&app.worker(), Duration::from_secs(30)).await;
    label(&app, &after[..10]).await;
    let calls = fake.billed_calls().len();

    let all_local = op(&app, split(json!({"threshold": 0.0}))).await;
    assert_eq!(fake.billed_calls().len(), calls, "no provider call");
    // Trained on the window before the split only: the 150 answers and the 5 labels, which
    // stand over the model's answers for their tickets; today's tickets and labels judge.
    assert_eq!(
        (&all_local["from_results"], &all_local["from_feedback"]),
        (&json!(150), &json!(5)),
        "{all_local}"
    );
    assert_eq!(all_local["examples"], 150);
    let (all, desk, model) = (&all_local["all"], &all_local["desk"], &all_local["model"]);
    assert_eq!(
        (&all["n"], &desk["n"], &model["n"]),
        (&json!(40), &json!(10), &json!(30))
    );
    // No cascade audited these tickets: its truth has none.
    assert_eq!(all_local["audit"]["n"], 0, "{all_local}");
    assert_eq!(
        all_local["graded"]["n"], 10,
        "the desk's tickets: {all_local}"
    );
    // Against its own answers the large model is right by definition.
    assert_eq!(model["large_accuracy"], 1.0);
    // Against the desk, as often as its answer is the desk's label.
    let agreeing = app
        .count(
            "SELECT count(*) FROM ticket_feedback f
             JOIN ticket_evaluation te ON te.ticket_id = f.ticket_id
             JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
             WHERE f.superseded_at IS NULL AND r.department = f.department
               AND f.created_at > now() - interval '1 day'",
        )
        .await;
    assert_eq!(desk["large_accuracy"], agreeing as f64 / 10.0, "{desk}");
    // Every ticket answered locally: nothing paid.
    assert_eq!(
        (&all["local_share"], &all["cascade_cost_per_ticket_usd"]),
        (&json!(1.0), &json!(0.0))
    );
    let paid: f64 = app
        .row(
            "SELECT sum(c.cost_usd)::float8 FROM provider_call c
             JOIN ticket_evaluation te ON te.idempotency_key = c.idempotency_key
             JOIN ticket t ON t.id = te.ticket_id WHERE t.created_at > now() - interval '1 day'",
        )
        .await
        .get(0);
    let per_ticket = all["large_cost_per_ticket_usd"].as_f64().unwrap();
    assert!(
        paid > 0.0 && (per_ticket - paid / 40.0).abs() < 1e-12,
        "{all}"
    );
    assert_eq!(all_local["curve"][0]["coverage"], 1.0);

    // Eight of the unlabelled tickets drawn by a cascade's audit at a share of 0.25: they are
    // the audit's truth, and in the graded precision each stands for four local answers.
    app.pool
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO cascade_audit
                 (idempotency_key, model_version, department, is_urgent, confidence, draw, share)
             SELECT te.idempotency_key, 'local-000000000000', 'billing', false, 0.95, 0.1, 0.25
             FROM ticket t JOIN ticket_evaluation te ON te.ticket_id = t.id
             WHERE t.created_at > now() - interval '1 day'
               AND NOT EXISTS (SELECT 1 FROM ticket_feedback f WHERE f.ticket_id = t.id)
             ORDER BY t.id LIMIT 8",
            &[],
        )
        .await
        .unwrap();
    let audited = op(&app, split(json!({"threshold": 0.0}))).await;
    let (desk, audit, graded) = (&audited["desk"], &audited["audit"], &audited["graded"]);
    assert_eq!(
        (&audit["n"], &graded["n"], &audited["model"]["n"]),
        (&json!(8), &json!(18), &json!(22)),
        "{audited}"
    );
    let precision = |s: &Value| s["local_precision"].as_f64().unwrap();
    let weighted = (10.0 * precision(desk) + 4.0 * 8.0 * precision(audit)) / (10.0 + 32.0);
    assert!(
        (precision(graded) - weighted).abs() < 1e-12,
        "graded {graded}, desk {desk}, audit {audit}"
    );

    // Nothing local: the cascade is the large model, on the same rows, at the same cost.
    let none_local = op(&app, split(json!({"threshold": 1.0}))).await;
    let all = &none_local["all"];
    assert_eq!(all["local_share"], 0.0);
    assert_eq!(all["cascade_accuracy"], all["large_accuracy"]);
    assert_eq!(
        (&all["difference"], &none_local["paired"]["mcnemar_p"]),
        (&json!(0.0), &json!(1.0))
    );
    assert_eq!(
        all["cascade_cost_per_ticket_usd"],
        all["large_cost_per_ticket_usd"]
    );

    // A target precision: thresholds cross-fitted on the training window.
    let target = op(&app, split(json!({"precision": 0.9}))).await;
    assert_eq!(target["rule"], json!({"precision": 0.9}));
    assert_eq!(target["thresholds"]["rows"], 150, "{target}");
    let local_precision = &target["all"]["local_precision"];
    assert!(
        local_precision.is_null() || local_precision.as_f64().unwrap() > 0.5,
        "{target}"
    );

    // Each run is stored; an erased ticket no longer trains the candidate.
    assert_eq!(app.count("SELECT count(*) FROM time_split_run").await, 4);
    let erased: String = app
        .row("SELECT id::text FROM ticket ORDER BY created_at LIMIT 1")
        .await
        .get(0);
    op(&app, json!({"op": "erase", "ticket_ids": [erased]})).await;
    let after_erasure = op(&app, split(json!({"threshold": 0.5}))).await;
    assert_eq!(after_erasure["from_results"], 149, "{after_erasure}");

    // The Quality page leads with the newest split: its figures per truth, and the
    // risk–coverage curves (on the judged tickets; with a target, out of fold too).
    let page = crate::console::console_page(&app, "/admin/quality").await;
    let stored = after_erasure["stored"].as_i64().unwrap();
    let lead = page.find("Judged as production runs").unwrap();
    assert!(lead < page.find("Cascade thresholds").unwrap(), "it leads");
    assert!(
        page.contains(&format!(r#"data-time-split="{stored}""#)),
        "{page}"
    );
    for truth in ["all", "desk", "audit", "model", "graded"] {
        assert!(
            page.contains(&format!(r#"data-truth="{truth}""#)),
            "{truth}: {page}"
        );
    }
    assert!(
        page.contains("Risk–coverage on the judged tickets"),
        "{page}"
    );
    op(&app, split(json!({"precision": 0.9}))).await;
    let page = crate::console::console_page(&app, "/admin/quality").await;
    assert!(page.contains("Risk–coverage out of fold"), "{page}");

    // No production answer after the split: refused, saying so.
    let empty = triage_refusal(&app, split(json!({"at": "2000-01-01T00:00:00Z"}))).await;
    assert!(empty.contains("train"), "{empty}");
    // The split's flags go with --by-time only, and --by-time judges no labelled set.
    let stray = json!({"op": "eval", "set": "shipped", "precision": 0.9});
    assert!(triage_refusal(&app, stray).await.contains("--by-time"));
    let with_set = triage_refusal(&app, split(json!({"set": "shipped"}))).await;
    assert!(with_set.contains("--set"), "{with_set}");
}

async fn triage_refusal(app: &TestApp, payload: Value) -> String {
    match crate::helpers::operations::try_op(app, payload).await {
        Err(triage::Error::InvalidRequest(e)) => e.to_string(),
        other => panic!("not refused: {other:?}"),
    }
}
