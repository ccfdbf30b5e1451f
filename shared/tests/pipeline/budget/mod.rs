//! The daily spend budget (`TRIAGE_DAILY_BUDGET_USD`): workers stop claiming when the day's
//! spend reaches it, spend no attempt and lose nothing, and go on the next UTC day.
//! - `stopping`: workers stop at the budget, overshoot it by at most one call each (on
//!   tickets of any size), and go on the next UTC day.
//! - `unpriced`: a model without a price under a budget: refused at start, its jobs wait,
//!   and reprocess, promote and redrive refuse it.
//! - `spend`: the day's spend in stats without a budget, and after erasure.
//! - `running_total`: the running total, through the ledger's own functions.

mod running_total;
mod spend;
mod stopping;
mod unpriced;

use crate::helpers::TestApp;

/// 20 output tokens a call at $500 per million, input free: one cent a call.
const CENTS_PER_CALL: &str = "gpt-6-luna=0/500";
const BUDGET_USD: f64 = 0.03;

async fn post_unique(app: &TestApp, n: usize) {
    for i in 0..n {
        let created = app.post_ticket(&format!("Unique ticket {i}"), "body").await;
        assert_eq!(created.status, 201);
    }
}

/// Input at $100 per million tokens, output free: a call costs what its ticket's size says.
const PRICED_BY_SIZE: &str = "gpt-6-luna=100/0";
