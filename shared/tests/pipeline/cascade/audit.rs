//! The cascade grades itself (docs/cascade.md, "The audit" and "Suspension"): a random share
//! of would-be-local answers goes to the large model too; `cascade status` gives the audited
//! precision with its exact interval; a cascade whose bound falls below its target suspends
//! itself on the sweeper's tick, after which every new ticket costs a call, until an audited
//! `cascade resume`.

use std::time::{Duration, Instant};

use fake_provider::{Behavior, FakeProvider};
use serde_json::{json, Value};
use triage::{
    operations,
    pipeline::{
        cascade::{
            examples::{self, Window},
            gather::Gathered,
        },
        sweep::Sweeper,
    },
    providers::Policy,
};

use super::{configured, trained};
use crate::helpers::{
    operations::{op, try_op},
    spawn_app_with_fake, TestApp,
};

/// `n` tickets with their own text each (no dedup between them).
fn distinct_tickets(n: usize, tag: &str) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("Invoice question {tag} {i}"),
                format!("I was charged twice for order {tag}-{i}, please refund the invoice."),
            )
        })
        .collect()
}

async fn tick(app: &TestApp) {
    let sweeper = Sweeper::new(app.pool.clone(), app.config.clone()).unwrap();
    operations::sweep(&sweeper, Instant::now() + Duration::from_secs(10))
        .await
        .unwrap();
}

async fn status(app: &TestApp) -> Value {
    op(app, json!({"op": "cascade", "action": "status"})).await
}

#[tokio::test]
async fn an_audit_share_of_0_2_sends_between_15_and_25_percent_of_would_be_local_tickets_to_the_model(
) {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let (local, _) = trained(&app, "shipped").await;
    // Threshold 0: the classifier is sure of every ticket, so all 2,000 would be local.
    let app = configured(
        &app,
        &format!("cascade({local},0,gpt-6-luna@medium)"),
        |c| {
            c.audit.share = 0.2;
            c.worker.batch_size = 100;
            c.worker.concurrency = 16;
        },
    );
    let cascade = app.config.versions.model.as_str().to_string();
    app.ingest_many(&distinct_tickets(2_000, "a")).await;
    app.drain(&app.worker(), Duration::from_secs(240)).await;

    let audited = app.count("SELECT count(*) FROM cascade_audit").await;
    assert!((300..=500).contains(&audited), "{audited} of 2000 audited");
    // Each audited ticket was answered by the model (one billed call each, in the ledger);
    // the others locally, with no call.
    let by_model = app
        .count(&format!(
            "SELECT count(*) FROM evaluation_result WHERE model_version = '{cascade}' \
             AND answered_by = 'model'"
        ))
        .await;
    assert_eq!(by_model, audited);
    assert_eq!(fake.billed_calls().len() as i64, audited);
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call").await,
        audited
    );
    let local_results = app
        .count("SELECT count(*) FROM evaluation_result WHERE answered_by = 'local'")
        .await;
    assert_eq!(local_results + audited, 2_000);
    // Every draw is recorded below the share, with what the classifier said.
    assert_eq!(
        app.count("SELECT count(*) FROM cascade_audit WHERE draw >= share OR share <> 0.2")
            .await,
        0
    );

    // The status: the audited precision, its exact interval around it, the implied target of
    // a numeric threshold below 0.9, and the local share over the window's results.
    let live = status(&app).await;
    // The figures docs/cascade.md quotes (`--nocapture`).
    eprintln!("audit at 0.2 over 2,000 would-be-local tickets: {live}");
    assert_eq!(live["model_version"], cascade.as_str());
    assert_eq!(live["audited"], audited);
    let (p, lo, hi) = (
        live["precision"].as_f64().unwrap(),
        live["interval"][0].as_f64().unwrap(),
        live["interval"][1].as_f64().unwrap(),
    );
    assert!(lo <= p && p <= hi, "{live}");
    assert_eq!(live["target"], 0.9);
    let share = live["local_share"].as_f64().unwrap();
    assert!(
        (share - local_results as f64 / 2_000.0).abs() < 1e-9,
        "{live}"
    );
    assert_eq!(live["suspended"], false);
    assert!(
        live["truth"].as_str().unwrap().starts_with("audit"),
        "{live}"
    );

    // Erasing an audited ticket erases its draw with its result.
    let ticket: uuid::Uuid = app
        .row(
            "SELECT te.ticket_id FROM cascade_audit a \
             JOIN ticket_evaluation te ON te.idempotency_key = a.idempotency_key LIMIT 1",
        )
        .await
        .get(0);
    op(&app, json!({"op": "erase", "ticket_ids": [ticket]})).await;
    assert_eq!(
        app.count("SELECT count(*) FROM cascade_audit").await,
        audited - 1
    );
}

#[tokio::test]
async fn a_classifier_the_model_contradicts_is_suspended_and_new_tickets_then_cost_a_call_each() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let (local, model) = trained(&app, "shipped").await;
    // Tickets the classifier answers `billing`; the large model says `general` of every one.
    let tickets: Vec<(String, String)> = distinct_tickets(60, "b")
        .into_iter()
        .filter(|(s, m)| model.predict(s, m).department == "billing")
        .collect();
    assert!(tickets.len() >= 40, "{} billing tickets", tickets.len());
    fake.set_default(Behavior::Answer(
        json!({"is_urgent": 0.1, "department": "general", "urgency_score": 0.1}),
    ));
    let app = configured(
        &app,
        &format!("cascade({local},0,gpt-6-luna@medium)"),
        |c| {
            c.audit.share = 0.5;
        },
    );
    let (first, later) = tickets.split_at(20);
    app.ingest_many(first).await;
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    let audited = app.count("SELECT count(*) FROM cascade_audit").await;
    assert!(audited >= 3, "{audited} audited of 20");
    let live = status(&app).await;
    assert_eq!(live["precision"], 0.0, "{live}");
    assert!(live["interval"][1].as_f64().unwrap() < 0.9, "{live}");
    assert_eq!(live["suspended"], false, "not before the sweeper's tick");

    // The sweeper's tick suspends it, saying why.
    tick(&app).await;
    let live = status(&app).await;
    eprintln!("suspended: {live}");
    assert_eq!(live["suspended"], true, "{live}");
    assert!(
        live["reason"]
            .as_str()
            .unwrap()
            .contains("below the target 0.9"),
        "{live}"
    );
    // A suspended cascade answers nothing locally: each new ticket is one call, no more.
    let (calls, locals) = (
        fake.billed_calls().len(),
        app.count("SELECT count(*) FROM evaluation_result WHERE answered_by = 'local'")
            .await,
    );
    let (suspended, after_resume) = later.split_at(10);
    app.ingest_many(suspended).await;
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    assert_eq!(fake.billed_calls().len(), calls + 10);
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_result WHERE answered_by = 'local'")
            .await,
        locals
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'")
            .await,
        0
    );

    // Resume: a reason is needed; refused while the bound is below the target; forced, audited.
    let resume = |reason: &str, force: bool| json!({"op": "cascade", "action": {"resume": {"reason": reason, "force": force}}});
    let refused = try_op(&app, resume(" ", false)).await;
    assert!(
        matches!(refused, Err(triage::Error::InvalidRequest(_))),
        "{refused:?}"
    );
    let refused = try_op(&app, resume("retrained offline", false)).await;
    let message = format!("{refused:?}");
    assert!(message.contains("--force"), "{message}");
    assert_eq!(status(&app).await["suspended"], true);
    let resumed = op(&app, resume("the model's labels were wrong", true)).await;
    assert_eq!(resumed["forced"], true, "{resumed}");
    assert_eq!(resumed["live"]["suspended"], false, "{resumed}");
    let audit_row = app
        .row(
            "SELECT parameters::text FROM operation_audit WHERE op = 'cascade' \
             AND parameters::text LIKE '%resume%' ORDER BY id DESC LIMIT 1",
        )
        .await;
    let parameters: String = audit_row.get(0);
    assert!(
        parameters.contains("the model's labels were wrong"),
        "{parameters}"
    );

    // Resumed, it answers locally again, and the window starts at the resume: the next tick
    // does not suspend it on the audits that had.
    tick(&app).await;
    assert_eq!(status(&app).await["suspended"], false);
    app.ingest_many(after_resume).await;
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    assert!(
        app.count("SELECT count(*) FROM evaluation_result WHERE answered_by = 'local'")
            .await
            > locals,
    );
}

#[tokio::test]
async fn no_audit_share_audits_nothing_and_a_version_that_is_no_cascade_has_no_status() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let refused = try_op(&app, json!({"op": "cascade", "action": "status"})).await;
    assert!(format!("{refused:?}").contains("no cascade"), "{refused:?}");
    let (local, _) = trained(&app, "shipped").await;
    let app = configured(
        &app,
        &format!("cascade({local},0,gpt-6-luna@medium)"),
        |c| {
            c.audit.share = 0.0;
        },
    );
    app.ingest_many(&distinct_tickets(50, "c")).await;
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    assert_eq!(app.count("SELECT count(*) FROM cascade_audit").await, 0);
    assert!(fake.billed_calls().is_empty());
    let live = status(&app).await;
    assert_eq!(
        (live["audited"].as_u64(), &live["precision"]),
        (Some(0), &Value::Null)
    );
    assert_eq!(live["interval"], json!([0.0, 1.0]));
}

/// What a retrain learns from (docs/cascade.md, "Kept fresh"): the large model's answers at 1
/// each, and its answers on audited tickets at the draw's weight, `1 / share`, at most
/// `AUDIT_WEIGHT_CAP`: each stands for the tickets the classifier answered itself.
#[tokio::test]
async fn an_audited_answer_trains_at_the_draws_weight_capped() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let (local, _) = trained(&app, "shipped").await;
    app.ingest_many(&distinct_tickets(20, "plain")).await;
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    let cascade = format!("cascade({local},0,gpt-6-luna@medium)");
    for (share, tag, n) in [(0.5, "half", 40), (0.05, "twentieth", 400)] {
        let app = configured(&app, &cascade, |c| c.audit.share = share);
        app.ingest_many(&distinct_tickets(n, tag)).await;
        app.drain(&app.worker(), Duration::from_secs(120)).await;
    }

    let policy = Policy::load(app.config.versions.policy.as_str()).unwrap();
    let mut gathered = Gathered::within(None);
    let mut client = app.pool.get().await.unwrap();
    let read = examples::results(&mut client, Window::last(30), &policy, 1.0, &mut gathered)
        .await
        .unwrap();
    let examples = gathered.into_examples();
    let weights = |tag: &str| -> Vec<f32> {
        let prefix = format!("Invoice question {tag} ");
        examples
            .iter()
            .filter(|e| e.subject.starts_with(&prefix))
            .map(|e| e.weight)
            .collect()
    };
    let app = &app;
    let audited = |share: f64| {
        let query = format!("SELECT count(*) FROM cascade_audit WHERE share = {share}");
        async move { app.count(&query).await }
    };
    assert_eq!(weights("plain"), vec![1.0; 20]);
    let half = audited(0.5).await as usize;
    assert!(half > 0);
    assert_eq!(weights("half"), vec![2.0; half]);
    let twentieth = audited(0.05).await as usize;
    assert!(twentieth > 0);
    assert_eq!(weights("twentieth"), vec![10.0; twentieth]);
    assert_eq!(read.rows, 20 + half + twentieth);
}
