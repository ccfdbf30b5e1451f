//! The day's spend: shown in stats without a budget, and kept through erasure.

use fake_provider::FakeProvider;
use serde_json::json;
use triage::providers::PriceTable;

use crate::{helpers::operations::op, helpers::spawn_app_with_fake};

use super::{post_unique, PRICED_BY_SIZE};

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
async fn spend_survives_erasure_and_the_ledger_keeps_the_money_without_the_key() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(PRICED_BY_SIZE).unwrap();
    })
    .await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let created = app.post_ticket(&format!("Erase me {i}"), "some text").await;
        ids.push(created.body["id"].as_str().unwrap().to_string());
    }
    app.drain(&app.worker(), std::time::Duration::from_secs(10))
        .await;
    let before = op(&app, json!({"op": "stats"})).await;
    let spent = before["spent_today_usd"].as_f64().unwrap();
    assert!(spent > 0.0, "{before}");

    let erased = op(&app, json!({"op": "erase", "ticket_ids": ids})).await;
    assert_eq!(erased["ledger_rows"], 3, "{erased}");
    let after = op(&app, json!({"op": "stats"})).await;
    assert_eq!(
        after["spent_today_usd"], before["spent_today_usd"],
        "{after}"
    );
    assert_eq!(after["cost_usd"], before["cost_usd"], "{after}");
    let kept = app
        .row("SELECT count(*), sum(cost_usd)::float8, count(*) FILTER (WHERE idempotency_key = 'erased') FROM provider_call")
        .await;
    assert_eq!(kept.get::<_, i64>(0), 3);
    assert!((kept.get::<_, f64>(1) - spent).abs() < 1e-9);
    assert_eq!(kept.get::<_, i64>(2), 3, "no content key is left");
}
