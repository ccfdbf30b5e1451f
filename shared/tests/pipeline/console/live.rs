//! The cascade's live precision on the Quality page, in headless Chromium: the audited
//! figures with their exact interval, the line over days with its band, and the suspension
//! the sweeper's tick decided.

use std::time::{Duration, Instant};

use fake_provider::{Behavior, FakeProvider};
use fantoccini::Locator;
use serde_json::json;
use triage::{operations, pipeline::sweep::Sweeper};

use super::{
    browser::{screenshot, text, Driver},
    serve_console,
};
use crate::helpers::{operations::op_cli, spawn_app_with_fake, TestApp};

#[tokio::test]
async fn in_chromium_the_quality_page_shows_the_audited_precision_its_band_and_the_suspension() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let trained = op_cli(&app, json!({"op": "train", "from": ["set:shipped:dev"]})).await;
    let local = trained["version"].as_str().unwrap();
    // Every would-be-local ticket audited; the large model says `general` of each, which the
    // classifier answers for none of these billing tickets.
    fake.set_default(Behavior::Answer(
        json!({"is_urgent": 0.1, "department": "general", "urgency_score": 0.1}),
    ));
    let mut config = (*app.config).clone();
    config.versions.model = format!("cascade({local},0,gpt-6-luna@medium)")
        .parse()
        .unwrap();
    config.audit.share = 1.0;
    let app = TestApp {
        pool: app.pool.clone(),
        config: std::sync::Arc::new(config),
    };
    let tickets: Vec<(String, String)> = (0..12)
        .map(|i| {
            (
                format!("Refund {i}"),
                format!("I was charged twice for invoice {i}, refund the payment please"),
            )
        })
        .collect();
    app.ingest_many(&tickets).await;
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    let sweeper = Sweeper::new(app.pool.clone(), app.config.clone()).unwrap();
    operations::sweep(&sweeper, Instant::now() + Duration::from_secs(10))
        .await
        .unwrap();
    let wrong = app
        .count("SELECT count(*) FROM cascade_audit WHERE department <> 'general'")
        .await;

    let base = serve_console(&app, None).await;
    let browser = driver.browser().await;
    browser
        .goto(&format!("{base}/admin/quality"))
        .await
        .unwrap();
    assert_eq!(text(&browser, "[data-live=audited]").await, "12");
    assert_eq!(
        text(&browser, "[data-live=precision]").await,
        format!("{:.3}", (12 - wrong) as f64 / 12.0)
    );
    let interval = text(&browser, "[data-live=interval]").await;
    assert!(interval.starts_with('['), "{interval}");
    assert!(
        text(&browser, "[data-live=suspended]")
            .await
            .contains("below the target 0.9"),
        "the sweeper's tick suspended it"
    );
    // One point a day (all today's), its band drawn.
    let points = browser
        .find_all(Locator::Css("[data-live=line] circle"))
        .await
        .unwrap();
    assert_eq!(points.len(), 1);
    assert!(browser
        .find(Locator::Css("[data-live=line] polygon.band"))
        .await
        .is_ok());
    screenshot(&browser, "quality-live").await;
    browser.close().await.unwrap();
}
