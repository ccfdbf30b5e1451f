//! Lanes and the bulk tiers on a real PostgreSQL: new tickets are claimed before bulk work,
//! which takes at most its share of a claim while they wait; reprocess and redrive enqueue
//! bulk work unless their operator chooses the interactive lane; bulk calls on flex are priced at
//! the flex rate, and flex's 429s spend no attempt and hold no one else off; bulk work in provider batches completes at the batch price,
//! falls back online line by line, is never submitted twice after a crash, and is read for
//! collection by key, not by a scan of the ledger per line.
//! - `claiming`: new tickets first, bulk work within its share; reprocess and redrive in
//!   the bulk lane unless their operator chooses the interactive one.
//! - `flex`: bulk calls on flex at the flex rate, and flex's 429s.
//! - `batches`: bulk work in provider batches: the batch price, the online fallback,
//!   collection by the sweeper and by key, the breaker and the ledger left alone.
//! - `submissions`: a batch is never submitted or paid twice: a crash between sending and
//!   recording, submissions given up, a spent budget cancelling the running batch.

mod batches;
mod claiming;
mod flex;
mod submissions;

use std::time::{Duration, Instant};

use fake_provider::{Api, FakeProvider};
use triage::{
    pipeline::outbox::Lane,
    providers::{PriceTable, ProviderKind, Tier, Usage},
};

use crate::helpers::{spawn_app_with_fake, TestApp};

async fn post_many(app: &TestApp, prefix: &str, n: usize) {
    for i in 0..n {
        assert_eq!(
            app.post_ticket(&format!("{prefix} {i}"), "body")
                .await
                .status,
            201
        );
    }
}

/// The usage and cost the ledger holds for the answered call on `tier`.
async fn answered_call(app: &TestApp, tier: &str) -> (Usage, f64) {
    let call = app
        .row(&format!(
            "SELECT input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, \
             cost_usd::float8 FROM provider_call WHERE tier = '{tier}' AND outcome = 'ok'"
        ))
        .await;
    let usage = Usage {
        input_tokens: call.get(0),
        cached_input_tokens: call.get(1),
        cache_write_tokens: call.get(2),
        output_tokens: call.get(3),
    };
    (usage, call.get(4))
}

fn count(lanes: &[Lane], lane: Lane) -> usize {
    lanes.iter().filter(|l| **l == lane).count()
}

/// An app whose bulk lane goes to `api`'s batches on `fake`, with three bulk tickets waiting
/// (subjects "bulk 0" to "bulk 2") and one new ticket.
pub(crate) async fn batch_app(fake: &FakeProvider, api: Api, budget_usd: Option<f64>) -> TestApp {
    fake.set_strict(true);
    let app = spawn_app_with_fake(fake, |config| {
        config.worker.bulk_tier = Tier::Batch;
        config.worker.daily_budget_usd = budget_usd;
        config.provider.prices = PriceTable::parse("gpt-6-luna=1/0.1/4, batch=0.5").unwrap();
        if api == Api::Anthropic {
            config.provider.kind = ProviderKind::Anthropic;
        }
    })
    .await;
    post_many(&app, "bulk", 3).await;
    app.exec("UPDATE evaluation_outbox SET lane = 'bulk'").await;
    post_many(&app, "new", 1).await;
    app
}

/// [`batch_app`] on `api`, whose bulk lane a worker has just sent as one batch.
pub(crate) async fn one_batch_sent(api: Api) -> (FakeProvider, TestApp) {
    let fake = FakeProvider::start().await;
    let app = batch_app(&fake, api, None).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let report = app.worker().tend_batches(deadline).await.unwrap();
    assert_eq!(report.submitted, 1, "{api:?}");
    (fake, app)
}

async fn outbox_done(app: &TestApp) -> i64 {
    app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'done'")
        .await
}

/// The one batch was sent once, collected, and each content billed once.
async fn collected_once(app: &TestApp, fake: &FakeProvider, api: Api) {
    assert_eq!(fake.batches().len(), 1, "{api:?}: nothing sent twice");
    assert!(
        fake.billed_by_content().values().all(|n| *n == 1),
        "{api:?}: billed = unique"
    );
    let state: String = app.row("SELECT state FROM batch_submission").await.get(0);
    assert_eq!(state, "collected", "{api:?}");
}
