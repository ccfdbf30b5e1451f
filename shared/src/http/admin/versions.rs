//! `GET /admin/versions`: the prompt/model versions tickets are evaluated under, and the
//! shadow diff between two of them (`shadow::shadow_diff`, as `triage shadow-diff`).

use std::collections::BTreeSet;

use axum::{
    extract::{rejection::QueryRejection, Query, State},
    http::StatusCode,
    response::Response,
};
use maud::{html, Markup};
use serde::Deserialize;

use super::{
    charts::{self, Bar},
    layout::{html_response, optional, page, PageError, Section},
    queries::{self, VersionInUse},
    ConsoleState,
};
use crate::{
    domain::versions::VersionSpec,
    operations::shadow::{self, Bucket, ShadowDiff},
};

#[derive(Deserialize)]
pub(super) struct Compare {
    from: Option<String>,
    to: Option<String>,
}

fn spec(field: &str, text: &str) -> Result<VersionSpec, PageError> {
    text.parse()
        .map_err(|e| PageError::bad_request(format!("{field}: {e}")))
}

pub(super) async fn show(
    State(state): State<ConsoleState>,
    query: Result<Query<Compare>, QueryRejection>,
) -> Result<Response, PageError> {
    let Query(compare) = query.map_err(|r| PageError::bad_request(r.body_text()))?;
    let pool = &state.app.pool;
    let config = &state.app.config;
    let versions = queries::versions_in_use(pool).await?;
    let diff = match (compare.from.as_deref(), compare.to.as_deref()) {
        (Some(from), Some(to)) if !from.is_empty() && !to.is_empty() => {
            let configured = &config.versions.model;
            let from = spec("from", from)?.resolve(configured);
            let to = spec("to", to)?.resolve(configured);
            let policy = config.versions.policy.as_str();
            Some(shadow::shadow_diff(pool, &from, &to, policy).await?)
        }
        (None, None) => None,
        _ => return Err(PageError::bad_request("give both from and to versions")),
    };
    let configured = config.versions.pair().to_string();
    let body = html! {
        (in_use(&versions, &configured))
        (picker(&versions, &compare))
        @if let Some(diff) = &diff { (diff_section(diff)) }
    };
    Ok(html_response(
        StatusCode::OK,
        page(Section::Versions, "Versions", body),
    ))
}

fn in_use(versions: &[VersionInUse], configured: &str) -> Markup {
    html! {
        h2 { "In use" }
        p { "New tickets are keyed under the configured version " code { (configured) } ". "
            "How right each version is: " a href="/admin/quality" { "Quality" } " (eval runs on the labelled set)." }
        table {
            thead { tr { th scope="col" { "Prompt" } th scope="col" { "Model" }
                         th.num scope="col" { "Tickets" } th.num scope="col" { "With a result" } th scope="col" { "Role" } } }
            tbody {
                @for v in versions {
                    tr {
                        td { code { (v.prompt_version) } } td { code { (v.model_version) } }
                        td.num { (v.tickets) } td.num { (v.results) }
                        td {
                            @if v.promoted { "promoted: readers see it. " }
                            @if format!("{}/{}", v.prompt_version, v.model_version) == configured { "configured: new tickets." }
                        }
                    }
                }
            }
        }
    }
}

fn picker(versions: &[VersionInUse], compare: &Compare) -> Markup {
    let options: Vec<String> = versions
        .iter()
        .map(|v| format!("{}/{}", v.prompt_version, v.model_version))
        .collect();
    let select = |id: &str, label: &str, chosen: Option<&str>, fallback: usize| {
        let chosen = chosen
            .map(str::to_string)
            .or_else(|| options.get(fallback).cloned());
        html! {
            label for=(id) { (label) }
            select id=(id) name=(id) {
                @for option in &options {
                    option value=(option) selected[chosen.as_deref() == Some(option)] { (option) }
                }
            }
        }
    };
    html! {
        h2 { "Shadow diff" }
        @if options.len() < 2 {
            p { "Two versions are needed; reprocess under a new one first (runbook)." }
        } @else {
            form method="get" action="/admin/versions" {
                (select("from", "From", compare.from.as_deref(), 0)) " "
                (select("to", "To", compare.to.as_deref(), 1)) " "
                button type="submit" { "Compare" }
            }
        }
    }
}

fn diff_section(diff: &ShadowDiff) -> Markup {
    let departments: BTreeSet<&str> = diff
        .confusion
        .iter()
        .flat_map(|c| [c.from.as_str(), c.to.as_str()])
        .collect();
    let cell = |from: &str, to: &str| {
        diff.confusion
            .iter()
            .find(|c| c.from == from && c.to == to)
            .map_or(0, |c| c.count)
    };
    let agreement = diff
        .department_agreement
        .map(|a| format!("{:.1}%", a * 100.0));
    let bars: Vec<Bar> = diff
        .urgency_diff
        .histogram
        .iter()
        .map(|b| Bar {
            label: bucket_label(b),
            value: b.count as f64,
            text: format!("{} tickets", b.count),
        })
        .collect();
    html! {
        h3 { code { (diff.from) } " → " code { (diff.to) } }
        dl.stats {
            div { dt { "Compared tickets" } dd data-stat="compared" { (diff.compared) } }
            div { dt { "Department agreement" } dd data-stat="agreement" { (optional(agreement)) } }
            div { dt { "Median urgency change" } dd { (optional(diff.urgency_diff.p50.map(|v| format!("{v:+.3}")))) } }
        }
        @if diff.compared > 0 {
            table {
                caption { "Departments: rows from, columns to" }
                thead { tr { th scope="col" { "from \\ to" } @for d in &departments { th.num scope="col" { (d) } } } }
                tbody {
                    @for from in &departments {
                        tr { th scope="row" { (from) } @for to in &departments { td.num { (cell(from, to)) } } }
                    }
                }
            }
            (charts::bars("Urgency score change (to − from), tickets per band", &bars, |v| format!("{v:.0}")))
            h4 { "Largest disagreements" }
            ul {
                @for d in &diff.largest_disagreements {
                    li { a href=(format!("/admin/tickets/{}", d.ticket_id)) { (d.ticket_id) } ": "
                         (d.from_department) " → " (d.to_department) ", urgency " (format!("{:+.2}", d.urgency_diff)) }
                }
            }
        }
    }
}

fn bucket_label(bucket: &Bucket) -> String {
    match (bucket.lower, bucket.upper) {
        (None, Some(upper)) => format!("< {upper}"),
        (Some(lower), None) => format!("≥ {lower}"),
        (Some(lower), Some(upper)) => format!("{lower}…{upper}"),
        (None, None) => "all".into(),
    }
}
