//! Workers stop claiming at the day's budget, overshoot it by at most one call each, whatever
//! the sizes of the tickets, and go on the next UTC day.

use fake_provider::{prefix_tokens, usage_for, Behavior, FakeProvider};
use serde_json::json;
use triage::{
    pipeline::worker::{Report, Worker},
    providers::{PriceTable, Tier},
};

use crate::{
    helpers::operations::op,
    helpers::{spawn_app_with_fake, TestApp},
};

use super::{post_unique, BUDGET_USD, CENTS_PER_CALL, PRICED_BY_SIZE};

async fn app_with_budget(fake: &FakeProvider) -> TestApp {
    spawn_app_with_fake(fake, |config| {
        config.provider.prices = PriceTable::parse(CENTS_PER_CALL).unwrap();
        config.worker.daily_budget_usd = Some(BUDGET_USD);
    })
    .await
}

/// Invocations of `worker` until one is stopped by the budget (within 30 s: while another
/// worker's calls hold what is left, an invocation ends at once, however many it takes).
async fn run_until_budget_stops(
    app: &TestApp,
    worker: &Worker<triage::providers::AnyProvider>,
) -> Report {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
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
    assert_eq!(
        app.count("SELECT count(*) FROM budget_grant").await,
        0,
        "the invocation's grant went back to the fleet at its end"
    );
}

#[tokio::test]
async fn four_workers_on_tickets_of_mixed_sizes_and_scripts_overshoot_the_budget_by_at_most_one_call_each(
) {
    let fake = FakeProvider::start().await;
    let budget_usd = 0.5;
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(PRICED_BY_SIZE).unwrap();
        config.worker.daily_budget_usd = Some(budget_usd);
    })
    .await;
    // Small tickets first: a per-call average learnt from them would let the large ones
    // through by the dozen. A third of the large ones are CJK, which costs up to a token per
    // byte where English costs a quarter: an estimate of four bytes a token would reserve a
    // quarter of what they cost.
    for i in 0..40 {
        let message = match i {
            _ if i < 8 || i % 2 == 0 => "x".repeat(200),
            _ if i % 3 == 0 => "退款请求".repeat(500),
            _ => "x".repeat(6000),
        };
        let created = app.post_ticket(&format!("Ticket {i}"), &message).await;
        assert_eq!(created.status, 201);
    }
    let workers = [app.worker(), app.worker(), app.worker(), app.worker()];
    let runs = workers.iter().map(|w| run_until_budget_stops(&app, w));
    futures::future::join_all(runs).await;

    let prices = PriceTable::parse(PRICED_BY_SIZE).unwrap();
    let billed = fake.billed_calls();
    // What the provider billed each call for (its prompt prefix included), at our prices.
    let cost = |call: &fake_provider::CallRecord| {
        let usage = call.usage;
        prices.cost(
            "gpt-6-luna",
            triage::providers::Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cached_input_tokens: usage.cached_input_tokens,
                cache_write_tokens: usage.cache_write_tokens,
            },
            Tier::Online,
        )
    };
    let spent: f64 = billed.iter().map(cost).sum();
    let largest = billed.iter().map(cost).fold(0.0, f64::max);
    assert!(
        spent >= budget_usd,
        "the budget was reached: {spent} of {budget_usd}"
    );
    assert!(
        spent <= budget_usd + workers.len() as f64 * largest,
        "{} calls spent {spent} for a {budget_usd} budget (largest call {largest})",
        billed.len()
    );
    let ledger = app
        .row("SELECT sum(cost_usd)::float8 FROM provider_call")
        .await
        .get::<_, f64>(0);
    assert!(
        (ledger - spent).abs() < 1e-9,
        "ledger {ledger}, bills {spent}"
    );
}

/// CJK, emoji or random text costs up to a token per byte: a reservation at four bytes a token
/// held a quarter of such a call, so concurrent workers overshot by more than a call each.
#[tokio::test]
async fn a_cjk_tickets_reservation_holds_all_the_provider_can_bill_for_it() {
    let fake = FakeProvider::start().await;
    // Never answered: its ledger row keeps what was reserved for it.
    fake.when_contains("退款", Behavior::Hang);
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(PRICED_BY_SIZE).unwrap();
        config.worker.daily_budget_usd = Some(100.0);
        config.worker.call_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let message = "退款请求".repeat(500);
    assert_eq!(app.post_ticket("Refund", &message).await.status, 201);
    app.run_worker_once(&app.worker()).await;

    let reserved: f64 = app
        .row("SELECT cost_usd::float8 FROM provider_call WHERE outcome = 'timeout'")
        .await
        .get(0);
    let versions = &app.config.versions;
    let policy = triage::providers::Policy::load(versions.policy.as_str()).unwrap();
    let prompt = triage::providers::Prompt::load(versions.prompt.as_str(), &policy).unwrap();
    let billable = usage_for(&message).input_tokens + prefix_tokens(&prompt.text);
    let billable_usd = 100.0 * billable as f64 / 1e6;
    assert!(
        reserved >= billable_usd,
        "reserved {reserved} for a call the provider may bill {billable_usd}"
    );
}
