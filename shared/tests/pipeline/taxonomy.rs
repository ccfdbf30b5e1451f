//! A desk's own taxonomy through the pipeline (docs/taxonomy.md): `TRIAGE_POLICY_VERSION`
//! naming a stored taxonomy, tickets ingested under it keep it, the worker answers each job
//! under its own (the prompt rendered from the definitions, the schema's enum its departments),
//! the key tells taxonomies apart, feedback is held to the deployment's, and a taxonomy that
//! cannot be loaded makes its jobs wait instead of being answered under another.

use std::time::Duration;

use fake_provider::FakeProvider;
use serde_json::{json, Value};
use triage::{domain::taxonomy::Taxonomy, operations::promote, pipeline::taxonomy};

use crate::{
    feedback::give,
    helpers::{
        operations::{op, op_cli, try_op_cli},
        spawn_app_with_fake, TestApp,
    },
};

const BANK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/desks/bank/taxonomy.json"
);

async fn stored(app: &TestApp, file: &[u8]) -> String {
    let parsed = Taxonomy::parse(file).unwrap();
    let client = app.pool.get().await.unwrap();
    taxonomy::add(&client, &parsed)
        .await
        .unwrap()
        .policy_version
}

/// The department and policy of ticket `id`'s result.
async fn answer(app: &TestApp, id: &str) -> (String, String) {
    let row = app
        .row(&format!(
            "SELECT r.department, r.policy_version FROM evaluation_result r
             JOIN ticket_evaluation te ON te.idempotency_key = r.idempotency_key
             WHERE te.ticket_id = '{id}'"
        ))
        .await;
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn a_77_department_desk_is_answered_in_its_own_departments_and_shares_no_answer() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.versions.prompt = "triage-v6".parse().unwrap();
    })
    .await;
    let bank_file = std::fs::read(BANK).unwrap();
    let bank = stored(&app, &bank_file).await;
    let shop = stored(
        &app,
        json!({"name": "shop", "departments": [
            {"name": "returns", "description": "Sending an order back, and its refund."},
            {"name": "delivery", "description": "Where an order is, and late parcels."}],
            "urgent": "The customer was charged and has nothing.", "urgent_threshold": 0.5})
        .to_string()
        .as_bytes(),
    )
    .await;
    let (bank_desk, shop_desk) = (app.under_policy(&bank), app.under_policy(&shop));

    // The same text at three desks: three jobs, three keys, three calls.
    let (subject, message) = (
        "My card",
        "The card I ordered two weeks ago has not arrived.",
    );
    let mut ids = Vec::new();
    for desk in [&bank_desk, &shop_desk, &app] {
        let created = desk.post_ticket(subject, message).await;
        assert_eq!(created.status, 201, "{:?}", created.body);
        ids.push(created.body["id"].as_str().unwrap().to_string());
    }
    assert_eq!(
        app.count("SELECT count(DISTINCT idempotency_key) FROM evaluation_outbox")
            .await,
        3,
        "two taxonomies never share a cached answer"
    );
    // One worker, configured for the bank, answers every job under the job's own policy.
    bank_desk
        .drain(&bank_desk.worker(), Duration::from_secs(20))
        .await;
    assert_eq!(fake.calls().len(), 3);

    let bank_taxonomy = Taxonomy::parse(&bank_file).unwrap();
    let bank_names: Vec<&str> = bank_taxonomy.department_names().collect();
    let (department, policy) = answer(&app, &ids[0]).await;
    assert!(bank_names.contains(&department.as_str()), "{department}");
    assert_eq!(policy, bank);
    let (department, policy) = answer(&app, &ids[1]).await;
    assert!(["returns", "delivery"].contains(&department.as_str()));
    assert_eq!(policy, shop);
    let (department, policy) = answer(&app, &ids[2]).await;
    assert!(fake_provider::DEPARTMENTS.contains(&department.as_str()));
    assert_eq!(policy, "policy-v1");

    // What the bank's call carried: its 77 departments as the schema's enum, the prompt
    // rendered from its definitions with the ticket framed as data.
    let bank_call = fake
        .calls()
        .into_iter()
        .find(|call| {
            call.body["response_format"]["json_schema"]["schema"]["properties"]["department"]
                ["enum"]
                .as_array()
                .is_some_and(|e| e.len() == 77)
        })
        .expect("a call under the bank's taxonomy");
    let system = bank_call.body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("help desk \"bank\""), "{system}");
    assert!(
        system.contains(&format!(
            "- \"{}\": {}",
            bank_taxonomy.departments[0].name, bank_taxonomy.departments[0].description
        )),
        "{system}"
    );
    assert!(!system.contains("\"billing\""));
    let user: Value =
        serde_json::from_str(bank_call.body["messages"][1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(user["subject"], subject);

    // The answer as callers read it names its taxonomy.
    let read = bank_desk.get_ticket(&ids[0]).await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["evaluation"]["policy_version"], bank.as_str());

    // Feedback is held to the deployment's taxonomy: a bank department is taken, a built-in one
    // is a 422 and changes nothing.
    let taken = give(
        &bank_desk,
        &ids[0],
        json!({"department": bank_names[3], "is_urgent": false}),
    )
    .await;
    assert_eq!(taken.status, 200, "{:?}", taken.body);
    let refused = give(
        &bank_desk,
        &ids[0],
        json!({"department": "billing", "is_urgent": false}),
    )
    .await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    assert!(refused.body.to_string().contains("billing"));
    assert_eq!(app.count("SELECT count(*) FROM ticket_feedback").await, 1);
}

#[tokio::test]
async fn a_job_whose_taxonomy_cannot_be_loaded_waits_and_is_never_answered_under_another() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let gone = app.under_policy("gone-0123456789ab");
    let created = gone.post_ticket("Lost", "Where is my parcel?").await;
    assert_eq!(created.status, 201, "{:?}", created.body);

    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!((report.claimed, report.released), (1, 1), "{report:?}");
    assert!(fake.calls().is_empty(), "no call under another policy");
    let row = app
        .row(
            "SELECT status, attempts, available_at > now(), last_error, policy_version
             FROM evaluation_outbox",
        )
        .await;
    assert_eq!(row.get::<_, &str>(0), "pending");
    assert_eq!(row.get::<_, i32>(1), 0, "its attempt given back");
    assert!(
        row.get::<_, bool>(2),
        "it waits before it is looked at again"
    );
    assert!(
        row.get::<_, &str>(3).contains("gone-0123456789ab"),
        "{:?}",
        row.get::<_, &str>(3)
    );
    assert_eq!(row.get::<_, &str>(4), "gone-0123456789ab");
    assert_eq!(app.count("SELECT count(*) FROM evaluation_result").await, 0);
}

/// `per_department` rows of each of the bank's departments from its shipped set (the first
/// ones of its dev split, then one of its test split), as a labelled set in `dir`.
fn bank_set(dir: &tempfile::TempDir, dev_per_department: usize) -> String {
    let rows = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/desks/bank/banking77.jsonl"
    ))
    .unwrap();
    let mut taken: std::collections::HashMap<(String, String), usize> = Default::default();
    let mut set = String::new();
    for line in rows.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let (department, split) = (
            row["department"].as_str().unwrap(),
            row["split"].as_str().unwrap(),
        );
        let wanted = if split == "dev" {
            dev_per_department
        } else {
            1
        };
        let count = taken.entry((department.into(), split.into())).or_default();
        if *count < wanted {
            *count += 1;
            set.push_str(line);
            set.push('\n');
        }
    }
    let path = dir.path().join("bank-sample.jsonl");
    std::fs::write(&path, set).unwrap();
    path.to_str().unwrap().to_string()
}

/// An eval through the CLI's entry point: the first call queues, the worker answers, the
/// second reports (and stores) the figures.
async fn evaluated(desk: &TestApp, payload: Value) -> Value {
    let first = op_cli(desk, payload.clone()).await;
    assert_eq!(first["complete"], false, "{first}");
    desk.drain(&desk.worker(), Duration::from_secs(60)).await;
    let report = op_cli(desk, payload).await;
    assert_eq!(report["complete"], true, "{report}");
    report
}

#[tokio::test]
async fn a_desk_is_evaluated_trained_and_cascaded_under_its_own_77_departments() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.versions.prompt = "triage-v6".parse().unwrap();
    })
    .await;
    let bank = stored(&app, &std::fs::read(BANK).unwrap()).await;
    let desk = app.under_policy(&bank);
    let dir = tempfile::tempdir().unwrap();
    let set = bank_set(&dir, 3);

    // The large model on the test split, under the desk's taxonomy: its 77 classes, no rules
    // floor (the rules know only the built-in desk), the run stored under the taxonomy.
    let report = evaluated(&desk, json!({"op": "eval", "set": set, "split": "test"})).await;
    let run = &report["runs"][0];
    assert_eq!(run["n"], 77, "{run}");
    assert_eq!(run["answered"], 77);
    assert_eq!(report["baseline"], Value::Null);
    let stored_runs = format!("SELECT count(*) FROM eval_run WHERE policy_version = '{bank}'");
    assert_eq!(app.count(&stored_runs).await, 1);
    let foreign =
        format!("SELECT count(*) FROM evaluation_result WHERE policy_version <> '{bank}'");
    assert_eq!(
        app.count(&foreign).await,
        0,
        "every answer under the bank's taxonomy"
    );

    // A classifier trained for the bank, on the dev rows, and a cascade of it that answers
    // every test row locally (threshold 0) in the bank's departments.
    let trained = op_cli(
        &desk,
        json!({"op": "train", "from": [format!("set:{set}:dev")]}),
    )
    .await;
    let local = trained["version"].as_str().unwrap().to_string();
    let departments = app
        .row(&format!(
            "SELECT cardinality(departments) FROM local_model WHERE version = '{local}'"
        ))
        .await
        .get::<_, i32>(0);
    assert_eq!(departments, 77);
    let cascade = format!("triage-v6/cascade({local},0,gpt-6-luna@medium)");
    let calls_before = fake.calls().len();
    let eval = json!({"op": "eval", "set": set, "split": "test", "versions": [cascade]});
    let report = evaluated(&desk, eval.clone()).await;
    assert_eq!(report["runs"][0]["local_share"], 1.0, "{report}");
    assert_eq!(
        fake.calls().len(),
        calls_before,
        "no call for a local answer"
    );

    // Shadow diff and the promote gate read what was made under the taxonomy they are given.
    let (large, cascaded) = ("triage-v6/gpt-6-luna@medium".to_string(), cascade.clone());
    let diff = json!({"op": "shadow_diff", "from": large, "to": cascaded});
    assert_eq!(op(&desk, diff.clone()).await["compared"], 77);
    let mut built_in_diff = diff;
    built_in_diff["policy_version"] = json!("policy-v1");
    assert_eq!(op(&desk, built_in_diff).await["compared"], 0);
    let digest = report["set"]["digest"].as_str().unwrap().to_string();
    let mut gated = triage::config::Config::clone(&desk.config);
    gated.quality.set = Some(format!("sha256:{digest}"));
    let candidate: triage::domain::versions::VersionSpec = cascade.parse().unwrap();
    let candidate = candidate.resolve(&gated.versions.model);
    let under_bank = triage::providers::Policy::of_taxonomy(
        Taxonomy::parse(&std::fs::read(BANK).unwrap()).unwrap(),
    );
    let verdict = promote::quality_gate(&app.pool, &gated, &candidate, &under_bank).await;
    let said = format!("{verdict:?}");
    assert!(!said.contains("no run"), "both runs are the bank's: {said}");
    let built_in = triage::providers::Policy::load("policy-v1").unwrap();
    let verdict = promote::quality_gate(&app.pool, &gated, &candidate, &built_in).await;
    assert!(format!("{verdict:?}").contains("no run"), "{verdict:?}");

    // Reprocess under the taxonomy: a production ticket of the built-in desk queued again
    // under the bank's, its key naming it.
    let created = app.post_ticket("Card", "Where is my new card?").await;
    assert_eq!(created.status, 201);
    let reprocess = json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v6",
                           "policy_version": bank, "spread": "1s"});
    let queued_under_bank = format!(
        "SELECT count(*) FROM evaluation_outbox o JOIN ticket t ON t.id = o.ticket_id
         WHERE t.workload = 'production' AND o.policy_version = '{bank}'"
    );
    assert_eq!(app.count(&queued_under_bank).await, 0);
    op(&app, reprocess).await;
    assert_eq!(app.count(&queued_under_bank).await, 1);

    // The same classifier paired with the built-in policy is refused, and nothing is queued.
    let queued = app.count("SELECT count(*) FROM evaluation_outbox").await;
    let built_in = json!({"op": "eval", "set": "shipped", "split": "test", "versions": [cascade]});
    match try_op_cli(&app, built_in).await {
        Err(triage::Error::InvalidRequest(e)) => {
            assert_eq!(e.field, "model_version");
            assert!(
                e.reason.contains("trained for other departments"),
                "{}",
                e.reason
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox").await,
        queued
    );

    // `--policy-version` chooses the taxonomy where the environment names another: a
    // training from the built-in app's process, for the bank.
    let again = op_cli(
        &app,
        json!({"op": "train", "from": [format!("set:{set}:dev")], "policy_version": bank}),
    )
    .await;
    assert_eq!(
        again["version"],
        local.as_str(),
        "the same examples, the same classifier"
    );
    // And a stored taxonomy that does not exist is refused naming it.
    match try_op_cli(&app, json!({"op": "train", "from": [format!("set:{set}:dev")], "policy_version": "gone-0123456789ab"})).await {
        Err(triage::Error::InvalidRequest(e)) => {
            assert_eq!(e.field, "policy_version");
            assert!(e.reason.contains("gone-0123456789ab"), "{}", e.reason);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
