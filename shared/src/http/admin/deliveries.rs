//! `GET /admin/deliveries`: every subscription (webhooks and the bus) with its status (active,
//! failing, disabled and why), its deliveries by state, the oldest waiting one and the last
//! error; the same report as `triage deliveries`. Never a secret, never ticket text.

use axum::{extract::State, http::StatusCode, response::Response};
use maud::html;

use super::{
    layout::{html_response, page, PageError, Section},
    ConsoleState,
};
use crate::{pipeline::delivery::status, Result};

pub(super) async fn show(State(state): State<ConsoleState>) -> Result<Response, PageError> {
    let report = status::deliveries(&state.app.pool).await?;
    let body = html! {
        p {
            "Oldest undelivered: "
            strong data-stat="oldest_undelivered" {
                @match report.oldest_undelivered_age_seconds {
                    Some(age) => { (format!("{age:.0} s")) }
                    None => { "none waiting" }
                }
            }
        }
        @if report.endpoints.is_empty() {
            p.muted role="status" { "No subscriptions yet (POST /subscriptions)." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Subscription" } th scope="col" { "Kind" } th scope="col" { "Target" }
                    th scope="col" { "Status" } th.num scope="col" { "Pending" } th.num scope="col" { "In flight" }
                    th.num scope="col" { "Delivered" } th.num scope="col" { "Dead" }
                    th.num scope="col" { "Oldest waiting (s)" } th scope="col" { "Why" }
                } }
                tbody {
                    @for e in &report.endpoints {
                        tr data-endpoint=(e.subscription_id) {
                            td.id { (e.subscription_id) }
                            td { (e.kind) }
                            td { code { (e.target) } }
                            td data-status=(e.status) { (e.status) }
                            td.num { (e.pending) }
                            td.num { (e.processing) }
                            td.num { (e.delivered) }
                            td.num { (e.dead) }
                            td.num { (e.oldest_pending_age_seconds.map(|s| format!("{s:.0}")).unwrap_or_default()) }
                            td { (e.why().unwrap_or("")) }
                        }
                    }
                }
            }
            p.muted {
                "A disabled endpoint gets its events again with "
                code { "triage replay-deliveries --subscription ID --since 3d" }
                " (same event ids; it is re-enabled)."
            }
        }
    };
    Ok(html_response(
        StatusCode::OK,
        page(Section::Deliveries, "Deliveries", body),
    ))
}
