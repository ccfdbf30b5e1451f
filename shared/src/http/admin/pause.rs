//! The overview's pause switch: each lane (interactive, bulk, deliveries) with its Pause or
//! Resume button, posted with the page's CSRF token and run as `triage pause` / `resume` are
//! (audited, as the console's operator). docs/runbook.md, "Pause and resume".

use axum::{
    extract::{rejection::FormRejection, State},
    http::HeaderMap,
    response::{IntoResponse, Redirect, Response},
    Form,
};
use maud::{html, Markup};
use serde::Deserialize;

use super::{layout::PageError, posted, ConsoleState, Posted};
use crate::{
    operations::{self, Operator, Request},
    pipeline::pause::{Pausable, PauseEntry},
};

/// The switch: what is paused (since when, by whom, why), and a button per lane.
pub(super) fn switch(paused: &[PauseEntry], csrf: &str) -> Markup {
    html! {
        h2 { "Pause" }
        @if paused.is_empty() {
            p data-paused="" { "Nothing is paused." }
        } @else {
            p.alert role="status" data-paused=(paused.iter().map(|p| p.lane.as_str()).collect::<Vec<_>>().join(",")) {
                "Paused by an operator: nothing is claimed (or delivered) from these lanes until resumed."
            }
            table {
                thead { tr { th scope="col" { "Lane" } th scope="col" { "Since" }
                             th scope="col" { "By" } th scope="col" { "Reason" } } }
                tbody {
                    @for p in paused {
                        tr { td { (p.lane) } td { (p.paused_at.to_rfc3339()) }
                             td { (p.paused_by) } td { (p.reason.as_deref().unwrap_or("")) } }
                    }
                }
            }
        }
        @for lane in Pausable::ALL {
            @let is_paused = paused.iter().any(|p| p.lane == lane.as_str());
            form.inline method="post" action="/admin/pause" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="lane" value=(lane.as_str());
                @if is_paused {
                    input type="hidden" name="action" value="resume";
                    button type="submit" id=(format!("resume-{lane}")) { "Resume " (lane) }
                } @else {
                    input type="hidden" name="action" value="pause";
                    input name="reason" placeholder="reason" size="16" aria-label=(format!("Why pause {lane}"));
                    " "
                    button.danger type="submit" id=(format!("pause-{lane}")) { "Pause " (lane) }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub(super) struct PauseForm {
    csrf: String,
    lane: String,
    action: String,
    reason: Option<String>,
}

impl Posted for PauseForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// `POST /admin/pause`: pauses or resumes one lane, then back to the overview.
pub(super) async fn toggle(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    body: Result<Form<PauseForm>, FormRejection>,
) -> Result<Response, PageError> {
    let body = posted(&state.guard, &headers, body)?;
    let lane: Pausable = body
        .lane
        .parse()
        .map_err(|e: crate::domain::error::InvalidRequest| PageError::bad_request(e.reason))?;
    let request = match body.action.as_str() {
        "pause" => Request::Pause {
            lane: Some(lane),
            reason: body.reason.filter(|r| !r.trim().is_empty()),
        },
        "resume" => Request::Resume { lane: Some(lane) },
        _ => return Err(PageError::bad_request("action: pause or resume")),
    };
    let (pool, config) = (&state.app.pool, &state.app.config);
    operations::run(pool, config, request, &Operator::console()).await?;
    tracing::info!(%lane, action = body.action, "pause switch from the console");
    Ok(Redirect::to("/admin").into_response())
}
