//! `GET /admin/tickets/{id}`: one ticket (its text is shown here and nowhere else in the
//! console), the evaluation readers see (`pipeline::reads::read::find`, as `GET /tickets/{id}`), its jobs
//! and the attempt ledger of its content.

use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use maud::html;
use serde::Deserialize;

use super::{
    layout::{html_response, optional, page, usd, PageError, Section},
    queries, ConsoleState,
};
use crate::{domain::ticket::TicketId, pipeline::reads::read};

#[derive(Deserialize)]
pub(super) struct Lookup {
    id: Option<String>,
}

fn parse(text: &str) -> Result<TicketId, PageError> {
    text.trim().parse().map_err(|_| {
        PageError::bad_request(format!("{:?} is not a ticket id (a UUID)", text.trim()))
    })
}

/// The lookup form; with `?id=`, the ticket's own page.
pub(super) async fn lookup(Query(lookup): Query<Lookup>) -> Result<Response, PageError> {
    if let Some(id) = lookup.id.as_deref().filter(|s| !s.trim().is_empty()) {
        let id = parse(id)?;
        return Ok(Redirect::to(&format!("/admin/tickets/{id}")).into_response());
    }
    let body = html! {
        form method="get" action="/admin/tickets" {
            label for="id" { "Ticket id" }
            input id="id" name="id" size="38" required placeholder="00000000-0000-0000-0000-000000000000";
            " " button type="submit" { "Show" }
        }
    };
    Ok(html_response(
        StatusCode::OK,
        page(Section::Ticket, "Ticket", body),
    ))
}

pub(super) async fn show(
    State(state): State<ConsoleState>,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let id = parse(&id)?;
    let pool = &state.app.pool;
    let versions = state
        .app
        .live
        .versions(pool, &state.app.config.versions)
        .await?;
    let Some(view) = read::find(pool, &versions, id, None).await? else {
        return Err(PageError::not_found(format!("no ticket {id}")));
    };
    let (jobs, calls) = queries::ledger(pool, id).await?;
    let evaluation = &view.evaluation;
    let total: f64 = calls.iter().filter_map(|c| c.cost_usd).sum();
    let body = html! {
        p { "Created " (view.created_at.format("%Y-%m-%d %H:%M:%S UTC")) ". Id " code { (view.id) } }
        h2 { "Text" }
        p { strong { "Subject: " } (view.subject) }
        pre.text { (view.message) }
        h2 { "Evaluation" }
        dl.stats {
            div { dt { "Status" } dd data-stat="status" { (evaluation.status) } }
            @if let Some(result) = &evaluation.result {
                div { dt { "Department" } dd { (result.department) } }
                div { dt { "Urgent" } dd { (format!("{:.2}", result.is_urgent)) } }
                div { dt { "Urgency score" } dd { (format!("{:.2}", result.urgency_score)) } }
                div { dt { "Answered by" } dd data-stat="answered_by" { (result.answered_by) } }
            }
        }
        p.muted {
            "Versions shown: " code { (evaluation.requested_prompt_version) "/" (evaluation.requested_model_version) }
            " (" (format!("{:?}", evaluation.shown_because).to_lowercase()) ")"
            @if let Some(result) = &evaluation.result { ", policy " code { (result.policy_version) } }
        }
        h2 { "Jobs" }
        table {
            thead { tr { th scope="col" { "Key" } th scope="col" { "Versions" } th scope="col" { "Status" }
                         th.num scope="col" { "Attempts" } th scope="col" { "Last error class" } } }
            tbody {
                @for job in &jobs {
                    tr { td { code { (job.idempotency_key) } }
                         td { code { (job.prompt_version) "/" (job.model_version) } }
                         td { (job.status.as_deref().unwrap_or("done (row retired)")) }
                         td.num { (optional(job.attempts)) } td { (optional(job.error_class.as_deref())) } }
                }
            }
        }
        h2 { "Attempt ledger" }
        p.muted { "Every provider call for this content (duplicates share it): "
                  (calls.len()) " calls, " (usd(total)) "." }
        table {
            thead { tr {
                th scope="col" { "Started (UTC)" } th scope="col" { "Key" } th.num scope="col" { "Attempt" }
                th scope="col" { "Provider" } th scope="col" { "Outcome" } th.num scope="col" { "HTTP" }
                th scope="col" { "Billed" } th.num scope="col" { "Tokens in/out" } th.num scope="col" { "Cost" }
                th.num scope="col" { "Latency" }
            } }
            tbody {
                @for c in &calls {
                    tr data-call-outcome=(c.outcome) {
                        td { (c.started_at.format("%Y-%m-%d %H:%M:%S")) }
                        td { code { (c.idempotency_key.get(..8).unwrap_or(&c.idempotency_key)) "…" } }
                        td.num { (c.attempt) } td { (c.provider) } td { (c.outcome) }
                        td.num { (optional(c.http_status)) }
                        td { (match c.billed { Some(true) => "yes", Some(false) => "no", None => "unknown" }) }
                        td.num { (optional(c.input_tokens)) " / " (optional(c.output_tokens)) }
                        td.num { (c.cost_usd.map_or_else(|| "—".into(), usd)) }
                        td.num { (c.latency_ms.map_or_else(|| "—".into(), |ms| format!("{ms} ms"))) }
                    }
                }
            }
        }
    };
    Ok(html_response(
        StatusCode::OK,
        page(Section::Ticket, &format!("Ticket {}", view.id), body),
    ))
}
