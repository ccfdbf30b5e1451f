//! `GET /admin`: queue health (the oldest claimable age first, as the article's headline
//! metric), the pause switch, breaker and rate-limit state, the last 24 hours of work and
//! spend, dedup savings.

use axum::{
    extract::State,
    http::{HeaderMap, StatusCode},
    response::Response,
};
use maud::{html, Markup};

use super::{
    charts::{self, Bar},
    layout::{age, optional, page, usd, PageError, Section},
    pause,
    queries::{self, Hour},
    with_csrf, ConsoleState,
};
use crate::{
    db,
    pipeline::{
        outbox::claim::Serves,
        pause::entries,
        reads::report::{self, Health},
    },
};

pub(super) async fn show(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let pool = &state.app.pool;
    let serves = Serves::for_model_version(&state.app.config.versions.model);
    let budget = state.app.config.worker.daily_budget_usd;
    let health = report::health(pool, serves, budget).await?;
    let hours = queries::last_24_hours(pool).await?;
    let rate_limits = queries::rate_limit_state(pool).await?;
    let paused = entries(&db::client(pool).await?).await?;
    Ok(with_csrf(&state.guard, &headers, StatusCode::OK, |csrf| {
        let body = html! {
            (queue(&health))
            (pause::switch(&paused, csrf))
            (provider(&health, &rate_limits))
            (activity(&hours))
            (money(&health, &hours))
        };
        page(Section::Overview, "Overview", body)
    }))
}

fn stat(id: &str, label: &str, value: impl std::fmt::Display) -> Markup {
    html! { div { dt id=(format!("{id}-label")) { (label) } dd aria-labelledby=(format!("{id}-label")) data-stat=(id) { (value) } } }
}

fn queue(h: &Health) -> Markup {
    html! {
        h2 { "Queue" }
        dl.stats {
            (stat("oldest", "Oldest claimable age", age(h.oldest_pending_age_seconds)))
            (stat("pending", "Pending", h.pending))
            (stat("delayed", "of which delayed (backoff, spread)", h.delayed))
            (stat("unserved", "of which no deployed worker claims", h.unserved_pending))
            (stat("processing", "Processing", h.processing))
            (stat("done", "Done", h.done))
            (stat("dead", "Dead", h.dead))
        }
        @if h.dead > 0 {
            p { a href="/admin/dead-letters" { (h.dead) " dead letters: see them by reason" } }
        }
    }
}

fn provider(h: &Health, rate_limits: &[queries::RateLimit]) -> Markup {
    html! {
        h2 { "Provider" }
        @if h.breakers.is_empty() {
            p { "Circuit breaker: closed (no failure recorded yet)." }
        } @else {
            table {
                caption.muted { "Circuit breaker, shared by every worker" }
                thead { tr { th scope="col" { "Provider" } th scope="col" { "State" }
                             th.num scope="col" { "Consecutive failures" } th scope="col" { "Open until" } } }
                tbody {
                    @for b in &h.breakers {
                        tr { td { (b.provider) } td data-breaker=(b.provider) { (b.state) }
                             td.num { (b.consecutive_failures) } td { (optional(b.open_until)) } }
                    }
                }
            }
        }
        @if rate_limits.is_empty() {
            p { "Rate limit: no call taken from it yet (or no limit set)." }
        } @else {
            table {
                caption.muted { "Rate limit, shared by every worker (spent ahead of now: calls wait once it is over about a second)" }
                thead { tr { th scope="col" { "Provider" } th.num scope="col" { "Requests spent ahead" }
                             th.num scope="col" { "Tokens spent ahead" } th.num scope="col" { "Held by a 429 for" } } }
                tbody {
                    @for r in rate_limits {
                        tr { td { (r.provider) } td.num { (age(r.requests_ahead_seconds)) }
                             td.num { (age(r.tokens_ahead_seconds)) }
                             td.num data-held=(r.provider) { (age(r.held_for_seconds)) } }
                    }
                }
            }
        }
    }
}

/// One bar per hour, labelled with the hour it starts.
fn hourly(
    hours: &[Hour],
    value: impl Fn(&Hour) -> f64,
    text: impl Fn(&Hour) -> String,
) -> Vec<Bar> {
    hours
        .iter()
        .map(|h| Bar {
            label: h.start.format("%H:00").to_string(),
            value: value(h),
            text: text(h),
        })
        .collect()
}

fn activity(hours: &[Hour]) -> Markup {
    let evaluations = hourly(
        hours,
        |h| h.evaluations as f64,
        |h| format!("{} evaluations", h.evaluations),
    );
    let calls = hourly(
        hours,
        |h| h.calls as f64,
        |h| format!("{} calls, {} failed", h.calls, h.failed_calls),
    );
    let count = |v: f64| format!("{v:.0}");
    html! {
        h2 { "Last 24 hours (UTC)" }
        (charts::bars("Evaluations per hour", &evaluations, count))
        (charts::bars("Provider calls per hour", &calls, count))
    }
}

fn money(h: &Health, hours: &[Hour]) -> Markup {
    let spend = hourly(hours, |h| h.cost_usd, |h| usd(h.cost_usd));
    html! {
        h2 { "Spend and savings" }
        (charts::bars("Spend per hour", &spend, usd))
        dl.stats {
            (stat("billed-calls", "Billed calls (all time)", h.billed_calls))
            (stat("possibly-billed", "Outcome unknown (possibly billed)", h.possibly_billed_calls))
            (stat("cost", "Spend (all time)", usd(h.cost_usd)))
            (stat("duplicates", "Duplicate tickets (calls not made)", h.duplicate_tickets))
            (stat("saved", "Saved by dedup", usd(h.saved_usd)))
            (stat("cost-per-ticket", "Cost per evaluated ticket", h.cost_per_ticket_usd.map_or("-".to_string(), usd)))
            (stat("month-projection", "This month at the last 24 h's rate", usd(h.month_projection_usd)))
        }
        p.muted { "Savings: one call per duplicate ticket, at the average cost of a successful call." }
    }
}
