//! Bulk calls on flex are priced at the flex rate, and flex's 429s spend no attempt and hold
//! no one else off.

use std::time::Duration;

use fake_provider::{FakeProvider, Flex};
use triage::providers::{PriceTable, Tier};

use crate::helpers::spawn_app_with_fake;

use super::{answered_call, post_many};

#[tokio::test]
async fn bulk_work_on_flex_is_priced_at_the_flex_rate_and_its_429_spends_no_attempt() {
    let fake = FakeProvider::start().await;
    fake.set_strict(true);
    fake.set_flex(Flex {
        delay: Duration::ZERO,
        unavailable_every: 1,
    });
    let app = spawn_app_with_fake(&fake, |config| {
        config.worker.bulk_tier = Tier::Flex;
        config.provider.prices = PriceTable::parse("gpt-6-luna=1/0.1/4, batch=0.5").unwrap();
    })
    .await;
    post_many(&app, "bulk", 1).await;
    app.exec("UPDATE evaluation_outbox SET lane = 'bulk'").await;
    post_many(&app, "new", 1).await;
    let worker = app.worker();
    // Every flex call is refused: the bulk job goes back with its attempt, the new ticket is
    // evaluated online meanwhile, held off by nothing.
    let report = app.run_worker_once(&worker).await;
    assert!(report.claimed >= 2, "{report:?}");
    let row = app
        .row("SELECT status, attempts, lane FROM evaluation_outbox WHERE lane = 'bulk'")
        .await;
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, i32>(1)),
        ("pending".into(), 0)
    );
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE lane = 'interactive' AND status = 'done'"
        )
        .await,
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call WHERE tier = 'flex' AND lane = 'bulk' AND outcome = 'rate_limited'").await,
        1
    );
    assert!(fake
        .calls()
        .iter()
        .any(|c| c.body["service_tier"] == "flex"));

    // Flex has room again: the bulk job is answered at the flex price, its cached prefix too.
    fake.set_flex(Flex::default());
    app.drain(&worker, Duration::from_secs(20)).await;
    let (usage, cost) = answered_call(&app, "flex").await;
    assert!(
        usage.cached_input_tokens > 0,
        "the prompt prefix was seen before: {usage:?}"
    );
    let prices = &app.config.provider.prices;
    let flex = prices.cost("gpt-6-luna", usage, Tier::Flex);
    assert!((cost - flex).abs() < 1e-8, "{cost} != {flex} for {usage:?}");
    assert!(cost < prices.cost("gpt-6-luna", usage, Tier::Online));
    let online: f64 = app
        .row("SELECT cost_usd::float8 FROM provider_call WHERE tier = 'online' AND outcome = 'ok'")
        .await
        .get(0);
    assert!(online > 0.0);
}
