//! The cascade (docs/cascade.md): `triage train` and `triage models`; a cascade version's
//! local classifier answers what it is sure of with no call and no ledger row, the large model
//! the rest; a cascade goes through reprocess, shadow diff and promote like any version; and
//! while the provider cannot be asked, new tickets get a provisional local answer, announced
//! once, which the final answer replaces (a second event).

use std::{collections::HashSet, sync::Arc, time::Duration};

use fake_provider::{Behavior, FakeProvider};
use serde_json::{json, Value};
use triage::{
    config::Config,
    evaluate::{local::LocalModel, PriceTable},
    pipeline::{cascade::models, sweep::Sweeper},
};

use crate::{
    delivery::{fast_delivery, ingest, subscribe, Answer, Receiver},
    helpers::{spawn_app, spawn_app_with_fake, TestApp},
    operations::{op, try_op},
};

const SHIPPED_SET: &str = include_str!("../../../evals/tickets.jsonl");

/// Trains a classifier on the shipped set's dev split; its version and the model itself.
async fn trained(app: &TestApp) -> (String, Arc<LocalModel>) {
    let trained = op(app, json!({"op": "train", "from": ["set:shipped:dev"]})).await;
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

/// Dev rows of the shipped set (which the classifier learnt) and tickets it never saw.
fn tickets() -> Vec<(String, String)> {
    let mut tickets: Vec<(String, String)> = SHIPPED_SET
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|row| row["split"] == "dev")
        .take(10)
        .map(|row| {
            let text = |f: &str| row[f].as_str().unwrap().to_string();
            (text("subject"), text("message"))
        })
        .collect();
    tickets.extend((0..10).map(|i| {
        (
            format!("Note {i}"),
            format!("Something came up with item {i}, see the attached."),
        )
    }));
    tickets
}

async fn result_of(app: &TestApp, subject: &str, model_version: &str) -> (String, String) {
    let row = app
        .row(&format!(
            "SELECT r.answered_by, r.idempotency_key FROM evaluation_result r \
             JOIN ticket t ON t.id = r.ticket_id \
             WHERE t.subject = '{}' AND r.model_version = '{model_version}'",
            subject.replace('\'', "''")
        ))
        .await;
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn train_stores_a_classifier_by_content_lists_it_and_never_learns_from_the_test_split() {
    let app = spawn_app().await;
    let trained = op(&app, json!({"op": "train", "from": ["set:shipped:dev"]})).await;
    let version = trained["version"].as_str().unwrap();
    assert!(version.starts_with("local-"), "{trained}");
    assert_eq!(trained["new"], true);
    // Every dev row once, and no test row.
    let dev: HashSet<(String, String)> = SHIPPED_SET
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|row| row["split"] == "dev")
        .map(|row| (row["subject"].to_string(), row["message"].to_string()))
        .collect();
    assert_eq!(trained["examples"], dev.len(), "{trained}");
    assert!(trained["bytes"].as_u64().unwrap() <= 5_000_000, "{trained}");

    // The same examples make the same artefact: stored once.
    let again = op(&app, json!({"op": "train", "from": ["set:shipped"]})).await;
    assert_eq!(
        (again["version"].as_str(), &again["new"]),
        (Some(version), &json!(false))
    );
    let listed = op(&app, json!({"op": "models"})).await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["version"], version);
    assert_eq!(listed[0]["examples"], dev.len());
    assert_eq!(listed[0]["sources"][0]["source"], "set:shipped:dev");

    // The test split, or the desk's labels as a set: refused as the payload is read, as a
    // flag is (the CLI and the ops Lambda share the parser).
    for from in ["set:shipped:test", "set:feedback:30"] {
        let payload = json!({"op": "train", "from": [from]});
        let parsed = serde_json::from_value::<triage::operations::Request>(payload);
        let error = parsed.expect_err(from).to_string();
        assert!(error.contains(from), "{error}");
    }
    // Sources with nothing in them: refused, nothing stored.
    let refused = try_op(
        &app,
        json!({"op": "train", "from": ["results:30", "feedback:30"]}),
    )
    .await;
    assert!(
        matches!(refused, Err(triage::Error::InvalidRequest(_))),
        "{refused:?}"
    );
    assert_eq!(app.count("SELECT count(*) FROM local_model").await, 1);
}

#[tokio::test]
async fn a_cascade_answers_what_its_classifier_is_sure_of_with_no_call_and_calls_the_model_for_the_rest(
) {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let (local, model) = trained(&app).await;
    let tickets = tickets();
    // A threshold between the tickets' confidences, so both stages answer some.
    let mut confidences: Vec<f64> = tickets
        .iter()
        .map(|(s, m)| model.predict(s, m).confidence)
        .collect();
    confidences.sort_by(f64::total_cmp);
    let threshold = (confidences[confidences.len() / 2] * 100.0).floor() / 100.0;
    let cascade = format!("cascade({local},{threshold},gpt-6-luna@medium)");
    let app = configured(&app, &cascade, |_| {});
    let cascade = app.config.versions.model.as_str().to_string();
    app.ingest_many(&tickets).await;
    app.drain(&app.worker(), Duration::from_secs(20)).await;

    let (mut local_answers, mut model_answers) = (0, 0);
    for (subject, message) in &tickets {
        let sure = model.predict(subject, message).confidence >= threshold;
        let (answered_by, key) = result_of(&app, subject, &cascade).await;
        let calls = app
            .count(&format!(
                "SELECT count(*) FROM provider_call WHERE idempotency_key = '{key}'"
            ))
            .await;
        if sure {
            assert_eq!((answered_by.as_str(), calls), ("local", 0), "{subject}");
            local_answers += 1;
        } else {
            assert_eq!((answered_by.as_str(), calls), ("model", 1), "{subject}");
            model_answers += 1;
        }
    }
    assert!(local_answers > 0 && model_answers > 0);
    assert_eq!(
        fake.billed_calls().len(),
        model_answers,
        "a paid call for each ticket the classifier was not sure of, none for the rest"
    );
}

#[tokio::test]
async fn a_cascade_version_goes_through_reprocess_shadow_diff_and_promote_like_any_version() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let tickets = tickets();
    app.ingest_many(&tickets).await;
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let (local, _) = trained(&app).await;

    // A classifier that is not stored is refused before anything is queued.
    let unknown = "cascade(local-0123456789ab,0.5,gpt-6-luna@medium)";
    let refused = try_op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v3",
               "model_version": unknown}),
    )
    .await;
    assert!(
        matches!(refused, Err(triage::Error::InvalidRequest(_))),
        "{refused:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox").await,
        20
    );

    let cascade = format!("cascade({local},0.5,gpt-6-luna@medium)");
    let reprocessed = op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v3",
               "model_version": cascade, "spread": "0s"}),
    )
    .await;
    assert_eq!(reprocessed["inserted"], 20, "{reprocessed}");
    let calls_before = fake.billed_calls().len();
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let local_answers = app
        .count(&format!(
            "SELECT count(*) FROM evaluation_result WHERE model_version = '{cascade}' \
             AND answered_by = 'local'"
        ))
        .await;
    assert!(local_answers > 0, "the classifier answered none at 0.5");
    assert_eq!(
        fake.billed_calls().len() - calls_before,
        20 - local_answers as usize
    );
    // Changing the threshold is a new version: new keys, queued again.
    let stricter = format!("cascade({local},0.99,gpt-6-luna@medium)");
    let dry = op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v3",
               "model_version": stricter, "dry_run": true}),
    )
    .await;
    assert_eq!(dry["inserted"], 20, "{dry}");

    let diff = op(
        &app,
        json!({"op": "shadow_diff", "from": "triage-v3/gpt-6-luna@medium",
               "to": format!("triage-v3/{cascade}")}),
    )
    .await;
    assert_eq!(diff["compared"], 20, "{diff}");

    let promoted = op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v3", "model_version": cascade,
               "force": true, "reason": "cascade test"}),
    )
    .await;
    assert_eq!(promoted["model_version"], cascade, "{promoted}");
    let id: String = app
        .row("SELECT id::text FROM ticket ORDER BY created_at LIMIT 1")
        .await
        .get(0);
    let shown = app.get_ticket(&id).await.body;
    assert_eq!(shown["evaluation"]["model_version"], cascade, "{shown}");
    assert_eq!(shown["evaluation"]["status"], "done");
    assert_eq!(shown["evaluation"]["provisional"], false);
}

/// The worker's invocations until every waiting ticket has a provisional answer.
async fn until_provisional(app: &TestApp, n: i64) {
    let worker = app.worker();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while app.count("SELECT count(*) FROM provisional_result").await < n {
        assert!(std::time::Instant::now() < until, "no provisional answers");
        app.run_worker_once(&worker).await;
    }
}

#[tokio::test]
async fn while_the_provider_is_down_new_tickets_get_a_provisional_answer_that_the_final_one_replaces_each_announced_once(
) {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, fast_delivery).await;
    let (local, _) = trained(&app).await;
    // Threshold 1: the classifier never answers finally, only provisionally.
    let app = configured(
        &app,
        &format!("cascade({local},1,gpt-6-luna@medium)"),
        |_| {},
    );
    let cascade = app.config.versions.model.to_string();
    let receiver = Receiver::start(|_| Answer::Status(204)).await;
    subscribe(&app, None, &receiver.url).await;
    fake.set_outage(Some(Behavior::Status(500)));
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(ingest(&app, None, &format!("Invoice {i} charged twice")).await);
    }
    until_provisional(&app, 3).await;
    assert_eq!(
        app.count("SELECT count(*) FROM provisional_result WHERE reason = 'breaker_open'")
            .await,
        3
    );
    for id in &ids {
        let shown = app.get_ticket(id).await.body;
        let evaluation = &shown["evaluation"];
        assert_eq!(evaluation["status"], "provisional", "{shown}");
        assert_eq!(evaluation["provisional"], true);
        assert_eq!(evaluation["answered_by"], "local");
        assert_eq!(evaluation["model_version"], cascade.as_str());
        assert!(evaluation["department"].is_string());
    }
    // Not done in the reports, and no result to dedup a call with.
    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["done"], 0, "{stats}");
    assert_eq!(app.count("SELECT count(*) FROM evaluation_result").await, 0);
    app.deliver_all(Duration::from_secs(10)).await;
    let provisional_events: Vec<Value> = bodies(&receiver);
    assert_eq!(provisional_events.len(), 3);
    assert!(provisional_events
        .iter()
        .all(|e| e["data"]["provisional"] == true && e["data"]["answered_by"] == "local"));

    // The provider is back: each ticket's call is made and paid once, its final answer
    // replaces the provisional one and is announced as a second event.
    fake.set_outage(None);
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    assert_eq!(fake.billed_by_content().len(), 3);
    assert!(fake.billed_by_content().values().all(|&n| n == 1));
    for id in &ids {
        let shown = app.get_ticket(id).await.body;
        assert_eq!(shown["evaluation"]["status"], "done", "{shown}");
        assert_eq!(shown["evaluation"]["provisional"], false);
        assert_eq!(shown["evaluation"]["answered_by"], "model");
    }
    app.deliver_all(Duration::from_secs(10)).await;
    let events = bodies(&receiver);
    assert_eq!(events.len(), 6, "three provisional, three final");
    let final_events: Vec<&Value> = events
        .iter()
        .filter(|e| e["data"]["provisional"] == false)
        .collect();
    assert_eq!(final_events.len(), 3);
    assert!(final_events
        .iter()
        .all(|e| e["data"]["answered_by"] == "model"));
    let webhook_ids: HashSet<String> = receiver.received().iter().map(|r| r.id.clone()).collect();
    assert_eq!(webhook_ids.len(), 6, "each event once, with its own id");
    // Answered finally, nothing is given again.
    app.run_worker_once(&app.worker()).await;
    assert_eq!(
        app.count("SELECT count(*) FROM provisional_result").await,
        3
    );
    assert_eq!(app.count("SELECT count(*) FROM delivery").await, 6);
}

fn bodies(receiver: &Receiver) -> Vec<Value> {
    receiver
        .received()
        .iter()
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect()
}

#[tokio::test]
async fn a_spent_budget_or_a_long_wait_gives_the_provisional_answer_and_it_never_dedups_a_call() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        // One cent a call, three cents a day.
        config.provider.prices = PriceTable::parse("gpt-6-luna=0/500").unwrap();
        config.worker.daily_budget_usd = Some(0.03);
    })
    .await;
    let (local, _) = trained(&app).await;
    let app = configured(
        &app,
        &format!("cascade({local},1,gpt-6-luna@medium)"),
        |_| {},
    );
    for i in 0..8 {
        app.post_ticket(&format!("Unique ticket {i}"), "body").await;
    }
    let worker = app.worker();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let report = loop {
        let report = app.run_worker_once(&worker).await;
        if report.budget_exhausted {
            break report;
        }
        assert!(
            std::time::Instant::now() < until,
            "the budget never stopped the worker"
        );
    };
    let answered = app.count("SELECT count(*) FROM evaluation_result").await;
    let given = app
        .count("SELECT count(*) FROM provisional_result WHERE reason = 'budget_spent'")
        .await;
    assert_eq!(given, 8 - answered, "{report:?}");
    assert!(report.provisional > 0);

    // The sweeper gives it to a ticket that waited longer than the delay, and not before.
    let waiting = |after: Duration| {
        configured(&app, app.config.versions.model.as_str(), move |config| {
            config.worker.daily_budget_usd = None;
            config.worker.provisional_after = after;
        })
    };
    let late = waiting(Duration::from_secs(3600));
    late.post_ticket("One more", "body").await;
    let sweeper = |app: &TestApp| Sweeper::new(app.pool.clone(), app.config.clone()).unwrap();
    let deadline = || std::time::Instant::now() + Duration::from_secs(5);
    let tick = sweeper(&late).tick(deadline()).await.unwrap();
    assert_eq!(tick.provisional, 0, "it has not waited an hour");
    let soon = waiting(Duration::ZERO);
    let tick = sweeper(&soon).tick(deadline()).await.unwrap();
    assert_eq!(tick.provisional, 1);
    assert_eq!(
        soon.count("SELECT count(*) FROM provisional_result WHERE reason = 'waiting'")
            .await,
        1
    );
    // A provisional answer never stands for the call: with room again, every ticket is
    // evaluated and billed once.
    soon.drain(&soon.worker(), Duration::from_secs(20)).await;
    assert_eq!(
        soon.count("SELECT count(*) FROM evaluation_result").await,
        9
    );
    assert_eq!(fake.billed_by_content().len(), 9);
}

#[tokio::test]
async fn erased_tickets_never_train_the_next_classifier_and_the_desks_correction_stands_over_the_models_answer(
) {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let tickets = tickets();
    app.ingest_many(&tickets).await;
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let distilled = op(&app, json!({"op": "train", "from": ["results:1"]})).await;
    assert_eq!(distilled["examples"], 20, "{distilled}");

    // The desk's correction stands over the model's answer for the same ticket.
    let id: String = app
        .row("SELECT id::text FROM ticket ORDER BY created_at LIMIT 1")
        .await
        .get(0);
    op(
        &app,
        json!({"op": "feedback", "items": [{"ticket_id": id, "department": "sales", "is_urgent": true}]}),
    )
    .await;
    let both = op(
        &app,
        json!({"op": "train", "from": ["results:1", "feedback:1"]}),
    )
    .await;
    assert_eq!(both["examples"], 20, "one example per ticket: {both}");
    assert_eq!(both["sources"][1]["examples"], 1);
    assert_ne!(both["version"], distilled["version"]);

    let erased = op(&app, json!({"op": "erase", "ticket_ids": [id]})).await;
    assert_eq!(erased["tickets"], 1);
    let after = op(
        &app,
        json!({"op": "train", "from": ["results:1", "feedback:1"]}),
    )
    .await;
    assert_eq!(after["examples"], 19, "{after}");
    assert_eq!(after["sources"][1]["examples"], 0);
}
