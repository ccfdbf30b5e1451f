//! The budget driven one step at a time: ledger rows started and answered by hand, and the
//! day's spend as the budget reads it.

use std::time::Duration;

use deadpool_postgres::Client;
use triage::{
    pipeline::{
        ledger::{self, CallId, CallOutcome, CallRecord, Start},
        limits::budget,
        outbox::ClaimedJob,
    },
    providers::{Tier, Usage},
};

use super::TestApp;

/// The ledger row of `job`'s call, at `estimate_usd`, with no rate limit.
pub async fn start(client: &Client, job: &ClaimedJob, estimate_usd: f64) -> CallId {
    match ledger::start_call(
        client,
        job,
        ("w", "openai"),
        estimate_usd,
        None,
        Tier::Online,
    )
    .await
    .unwrap()
    {
        Start::Call { call, .. } => call,
        other => panic!("{other:?}"),
    }
}

/// An answered call: 100 tokens in, 20 out, billed at `cost_usd` (unknown when `None`).
pub fn answered(cost_usd: Option<f64>) -> CallRecord {
    CallRecord {
        outcome: CallOutcome::Ok,
        http_status: Some(200),
        billed: cost_usd.map(|_| true),
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
            ..Default::default()
        },
        cost_usd,
        latency: Duration::from_millis(5),
    }
}

/// Today's spend (UTC), as the budget reads it.
pub async fn spent_today(app: &TestApp) -> f64 {
    let client = app.pool.get().await.unwrap();
    budget::spend(&client).await.unwrap().spent_today_usd
}
