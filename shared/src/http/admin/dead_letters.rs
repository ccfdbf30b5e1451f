//! `GET /admin/dead-letters`: dead letters grouped by reason with the newest examples (ids,
//! keys, errors; never ticket text), and redrive per reason in two steps: a confirmation page
//! that counts what would move (a dry run), then a CSRF-protected POST. Both steps run the
//! same operation as `triage redrive` (`operations::run`).

use std::time::Duration;

use axum::{
    extract::{rejection::FormRejection, Query, State},
    http::{HeaderMap, StatusCode},
    response::Response,
    Form,
};
use maud::html;
use serde::Deserialize;

use super::{
    layout::{html_response, page, PageError, Section},
    posted, queries, with_csrf, ConsoleState, Posted,
};
use crate::{
    operations::{self, HumanDuration, Operator, Outcome, Request},
    pipeline::{outbox::Lane, reads::report},
    Result,
};

/// The window shown and redriven unless the page says otherwise, as `triage dead-letters`.
const DEFAULT_SINCE: &str = "1d";
/// Examples listed per reason.
const EXAMPLES: i64 = 5;

#[derive(Deserialize)]
pub(super) struct Window {
    since: Option<String>,
}

fn since(text: Option<&str>) -> Result<Duration, PageError> {
    let text = text.filter(|s| !s.is_empty()).unwrap_or(DEFAULT_SINCE);
    text.parse::<HumanDuration>()
        .map(|d| d.0)
        .map_err(|e| PageError::bad_request(format!("since: {e}")))
}

pub(super) async fn show(
    State(state): State<ConsoleState>,
    Query(window): Query<Window>,
) -> Result<Response, PageError> {
    let since_text = window.since.unwrap_or_else(|| DEFAULT_SINCE.into());
    let window = since(Some(&since_text))?;
    let pool = &state.app.pool;
    let groups = report::dead_letters(pool, window).await?;
    let examples = queries::dead_examples(pool, window, EXAMPLES).await?;
    let body = html! {
        form method="get" action="/admin/dead-letters" {
            label for="since" { "Died within" }
            input id="since" name="since" value=(since_text) size="6";
            " " button type="submit" { "Show" }
        }
        @if groups.is_empty() {
            p.ok role="status" { "No dead letters within " (since_text) "." }
        }
        @for group in &groups {
            section aria-labelledby=(format!("reason-{}", group.reason)) {
                h2 id=(format!("reason-{}", group.reason)) {
                    code { (group.reason) } " — " span data-dead-count=(group.reason) { (group.count) } " dead"
                }
                p.muted { "Newest died at " (group.newest.format("%Y-%m-%d %H:%M:%S UTC")) "." }
                table {
                    caption.muted { "Newest examples" }
                    thead { tr {
                        th.num scope="col" { "Job" } th scope="col" { "Ticket" } th scope="col" { "Key" }
                        th.num scope="col" { "Attempts" } th scope="col" { "Died at (UTC)" } th scope="col" { "Error" }
                    } }
                    tbody {
                        @for e in examples.iter().filter(|e| e.reason == group.reason) {
                            tr {
                                td.num { (e.outbox_id) }
                                td.id { a href=(format!("/admin/tickets/{}", e.ticket_id)) { (e.ticket_id) } }
                                td { code { (e.idempotency_key) } }
                                td.num { (e.attempts) }
                                td { (e.died_at.format("%H:%M:%S")) }
                                td { (e.last_error.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
                form method="get" action="/admin/dead-letters/redrive" {
                    input type="hidden" name="reason" value=(group.reason);
                    input type="hidden" name="since" value=(since_text);
                    button type="submit" data-redrive=(group.reason) {
                        "Redrive " (group.reason) "…"
                    }
                }
            }
        }
    };
    Ok(html_response(
        StatusCode::OK,
        page(Section::DeadLetters, "Dead letters", body),
    ))
}

#[derive(Deserialize)]
pub(super) struct Reason {
    reason: String,
    since: Option<String>,
}

fn reason(text: &str) -> Result<String, PageError> {
    let text = text.trim();
    if text.is_empty() || text.len() > 100 {
        return Err(PageError::bad_request(
            "reason: give the reason class as the dead-letter page lists it",
        ));
    }
    Ok(text.to_string())
}

/// Runs `triage redrive --reason R --since S --limit N` exactly as the CLI does (audited),
/// `N` the count the operator confirmed.
async fn run_redrive(
    state: &ConsoleState,
    reason: String,
    since: Duration,
    spread: Duration,
    confirmed: i64,
) -> Result<i64, PageError> {
    let request = Request::Redrive {
        reason: Some(reason),
        since: Some(HumanDuration(since)),
        // Jobs that died after the confirmation page counted them stay dead: the page's count
        // is what the operator agreed to move.
        limit: Some(confirmed),
        spread: Some(HumanDuration(spread)),
        lane: None,
        dry_run: false,
        // The page's own confirmation step (the count first, then the button) is the
        // operator's confirmation of that many jobs.
        confirm: true,
    };
    let (pool, config) = (&state.app.pool, &state.app.config);
    match operations::run(pool, config, request, &Operator::console()).await? {
        Outcome::Redrive(report) => Ok(report.moved),
        other => unreachable!("redrive answered {other:?}"),
    }
}

pub(super) async fn confirm(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    query: Result<Query<Reason>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, PageError> {
    let Query(query) = query.map_err(|r| PageError::bad_request(r.body_text()))?;
    let reason = reason(&query.reason)?;
    let since_text = query.since.unwrap_or_else(|| DEFAULT_SINCE.into());
    let window = since(Some(&since_text))?;
    // A GET only reads: the count comes from the redrive's own dry run, called directly so no
    // audit row is written (the POST that follows is audited).
    let preview = operations::redrive::Selection {
        reason: Some(reason.clone()),
        since: Some(window),
        limit: None,
        spread: operations::DEFAULT_SPREAD,
        // A dry run moves nothing: the lane changes no count.
        lane: Lane::Bulk,
        batch_size: operations::BATCH_SIZE,
        dry_run: true,
    };
    // One run moves at most MAX_REDRIVE_LIMIT, like the CLI's.
    let count = operations::redrive::redrive(&state.app.pool, &preview)
        .await?
        .moved
        .min(operations::MAX_REDRIVE_LIMIT);
    let spread_default = HumanDuration(operations::DEFAULT_SPREAD).to_string();
    Ok(with_csrf(&state.guard, &headers, StatusCode::OK, |csrf| {
        page(
            Section::DeadLetters,
            "Confirm redrive",
            html! {
                p role="status" {
                    strong data-would-move=(count) { (count) } " dead letters with reason "
                    code { (reason) } ", died within " (since_text) ", will go back to pending."
                }
                p { "Their attempts start again at 0; their last error stays as history. Fix the
                     cause first, or they die again and each answered call is billed again." }
                form method="post" action="/admin/dead-letters/redrive" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="reason" value=(reason);
                    input type="hidden" name="since" value=(since_text);
                    input type="hidden" name="count" value=(count);
                    p {
                        label for="spread" { "Spread over" }
                        input id="spread" name="spread" value=(spread_default) size="8"
                              aria-describedby="spread-help";
                        span.muted id="spread-help" { " jobs become claimable at random within this window (0s: now)" }
                    }
                    button.danger type="submit" id="confirm-redrive" { "Redrive " (count) " dead letters" }
                    " " a href="/admin/dead-letters" { "Cancel" }
                }
            },
        )
    }))
}

#[derive(Deserialize)]
pub(super) struct RedriveForm {
    csrf: String,
    reason: String,
    since: Option<String>,
    spread: Option<String>,
    /// How many the confirmation page said would move.
    count: Option<String>,
}

impl Posted for RedriveForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

pub(super) async fn redrive(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    body: Result<Form<RedriveForm>, FormRejection>,
) -> Result<Response, PageError> {
    let body = posted(&state.guard, &headers, body)?;
    let reason = reason(&body.reason)?;
    let window = since(body.since.as_deref())?;
    let spread = match body.spread.as_deref().filter(|s| !s.is_empty()) {
        None => operations::DEFAULT_SPREAD,
        Some(text) => {
            text.parse::<HumanDuration>()
                .map_err(|e| PageError::bad_request(format!("spread: {e}")))?
                .0
        }
    };
    let confirmed: i64 = body
        .count
        .as_deref()
        .and_then(|count| count.parse().ok())
        .filter(|n| (0..=operations::MAX_REDRIVE_LIMIT).contains(n))
        .ok_or_else(|| PageError::bad_request("count: the number the confirmation page showed"))?;
    let moved = match confirmed {
        0 => 0,
        _ => run_redrive(&state, reason.clone(), window, spread, confirmed).await?,
    };
    tracing::info!(%reason, moved, "redrive from the console");
    Ok(html_response(
        StatusCode::OK,
        page(
            Section::DeadLetters,
            "Redrive done",
            html! {
                p.ok role="status" {
                    span data-moved=(moved) { (moved) } " dead letters with reason " code { (reason) }
                    " are pending again."
                }
                p { a href="/admin/dead-letters" { "Back to the dead letters" } " · "
                    a href="/admin" { "Overview" } }
            },
        ),
    ))
}
