//! The daily spend budget (`TRIAGE_DAILY_BUDGET_USD`): workers stop claiming when the day's
//! spend reaches it, spend no attempt and lose nothing, and go on the next UTC day.

use fake_provider::FakeProvider;
use serde_json::json;
use triage::{
    evaluate::PriceTable,
    pipeline::worker::{Report, Worker},
};

use crate::{
    helpers::{spawn_app_with_fake, TestApp},
    operations::op,
};

/// 20 output tokens a call at $500 per million, input free: one cent a call.
const CENTS_PER_CALL: &str = "gpt-6-luna=0/500";
const BUDGET_USD: f64 = 0.03;

async fn app_with_budget(fake: &FakeProvider) -> TestApp {
    spawn_app_with_fake(fake, |config| {
        config.provider.prices = PriceTable::parse(CENTS_PER_CALL).unwrap();
        config.worker.daily_budget_usd = Some(BUDGET_USD);
    })
    .await
}

async fn post_unique(app: &TestApp, n: usize) {
    for i in 0..n {
        let created = app.post_ticket(&format!("Unique ticket {i}"), "body").await;
        assert_eq!(created.status, 201);
    }
}

/// Invocations of `worker` until one is stopped by the budget (or `limit` of them ran).
async fn run_until_budget_stops(
    app: &TestApp,
    worker: &Worker<triage::evaluate::AnyProvider>,
) -> Report {
    for _ in 0..20 {
        let report = app.run_worker_once(worker).await;
        if report.budget_exhausted {
            return report;
        }
    }
    panic!("the budget never stopped the worker");
}

#[tokio::test]
async fn a_worker_stops_claiming_at_the_daily_budget_and_goes_on_the_next_utc_day() {
    let fake = FakeProvider::start().await;
    let app = app_with_budget(&fake).await;
    post_unique(&app, 10).await;
    let worker = app.worker();

    run_until_budget_stops(&app, &worker).await;
    let calls = fake.billed_calls().len();
    // Three cents buy three calls; the estimate may let one more through, never two.
    assert!(
        (3..=4).contains(&calls),
        "{calls} calls for a 3-call budget"
    );
    let untouched = app
        .count("SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0")
        .await;
    assert_eq!(
        untouched,
        10 - calls as i64,
        "the rest waits, no attempt spent"
    );

    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["daily_budget_usd"], BUDGET_USD);
    let spent = stats["spent_today_usd"].as_f64().unwrap();
    assert!((spent - calls as f64 * 0.01).abs() < 1e-9, "{stats}");

    // Another invocation the same day: nothing claimed, nothing called.
    let again = app.run_worker_once(&worker).await;
    assert!(again.budget_exhausted && again.claimed == 0, "{again:?}");
    assert_eq!(fake.billed_calls().len(), calls);

    // The next UTC day: yesterday's spend no longer counts.
    app.exec("UPDATE provider_call SET started_at = started_at - interval '1 day'")
        .await;
    run_until_budget_stops(&app, &worker).await;
    assert!(fake.billed_calls().len() >= calls + 3, "work went on");
}

#[tokio::test]
async fn concurrent_workers_overshoot_the_budget_by_at_most_one_call_each() {
    let fake = FakeProvider::start().await;
    let app = app_with_budget(&fake).await;
    post_unique(&app, 20).await;
    let workers = [app.worker(), app.worker(), app.worker()];
    let runs = workers.iter().map(|w| run_until_budget_stops(&app, w));
    futures::future::join_all(runs).await;
    let calls = fake.billed_calls().len();
    assert!(
        (3..=3 + workers.len()).contains(&calls),
        "{calls} calls for a 3-call budget and {} workers",
        workers.len()
    );
}

#[tokio::test]
async fn without_a_budget_stats_show_it_unset_and_today_s_spend() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post_unique(&app, 1).await;
    app.run_worker_once(&app.worker()).await;
    let stats = op(&app, json!({"op": "stats"})).await;
    assert!(stats["daily_budget_usd"].is_null(), "{stats}");
    assert!(stats["spent_today_usd"].as_f64().unwrap() > 0.0, "{stats}");
}

#[tokio::test]
async fn with_a_budget_a_model_without_a_price_is_refused_at_start_naming_triage_prices() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.versions.model = "gpt-unpriced@low".parse().unwrap();
        config.worker.daily_budget_usd = Some(10.0);
    })
    .await;
    let provider = triage::evaluate::AnyProvider::from_config(
        &app.config.provider,
        app.config.worker.call_timeout,
    )
    .unwrap();
    let refused = Worker::new(app.pool.clone(), provider, app.config.clone())
        .err()
        .expect("an unpriced model under a budget is refused");
    assert!(refused.to_string().contains("TRIAGE_PRICES"), "{refused}");
}

#[tokio::test]
async fn with_room_in_the_budget_one_invocation_drains_the_queue_after_costing_its_first_call() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(CENTS_PER_CALL).unwrap();
        config.worker.daily_budget_usd = Some(100.0);
    })
    .await;
    post_unique(&app, 20).await;
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!(
        (report.evaluated, report.budget_exhausted),
        (20, false),
        "{report:?}"
    );
}
