//! `GET /admin/quality`: how right each version is, from the stored eval runs (`triage eval`,
//! docs/quality.md) on the set the promote gate uses (`TRIAGE_EVAL_SET`) or another
//! (`?set=DIGEST`): the newest run of each version side by side, one version's (`?version=`)
//! figures per department ([`classes`], `?sort=support|f1`), its confusion as a heat map
//! (or its top confusions when the departments are many), and its misclassified tickets with
//! their text; and the newest
//! threshold sweep of each cascade on the set ([`thresholds`]). It leads with the newest
//! time split over production traffic ([`by_time`], `triage eval --by-time`), after the
//! configured cascade's live precision from its audit ([`live`]). Like the ticket
//! page, this page shows ticket text: eval tickets only (`runs::eval_ticket_texts`).

use axum::{
    extract::{rejection::QueryRejection, Query, State},
    http::StatusCode,
    response::Response,
};
use maud::{html, Markup};
use serde::Deserialize;

mod by_time;
mod classes;
mod live;
mod thresholds;

use super::{
    charts,
    layout::{html_response, optional, page, usd, PageError, Section},
    ConsoleState,
};
use crate::{
    db,
    domain::versions::ModelVersion,
    pipeline::{
        cascade::targets,
        feedback::{self, Agreement},
        taxonomy,
    },
    quality::view::{self as quality, confusions, RunFigures, Split, StoredRun, NO_ANSWER},
};
use classes::Order;

/// Misclassified tickets shown for the chosen version.
const MISSES_SHOWN: usize = 50;
/// A message longer than this is cut on the page (the ticket page has it whole).
const MESSAGE_SHOWN: usize = 600;

#[derive(Deserialize)]
pub(super) struct Choice {
    set: Option<String>,
    split: Option<String>,
    version: Option<String>,
    sort: Option<String>,
}

pub(super) async fn show(
    State(state): State<ConsoleState>,
    query: Result<Query<Choice>, QueryRejection>,
) -> Result<Response, PageError> {
    let Query(choice) = query.map_err(|r| PageError::bad_request(r.body_text()))?;
    let config = &state.app.config;
    let configured_policy = config.versions.policy.as_str();
    let loaded = taxonomy::policy(&db::client(&state.app.pool).await?, configured_policy).await?;
    let policy = loaded.map_err(|unusable| PageError::bad_request(unusable.to_string()))?;
    let configured =
        quality::configured_digest_now(config.quality.set.as_deref(), &policy, &state.app.pool)
            .await?;
    let digest = match choice.set.as_deref() {
        Some(d) if d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()) => d.to_lowercase(),
        Some(_) => {
            return Err(PageError::bad_request(
                "set: a SHA-256 digest, 64 hex digits",
            ))
        }
        None => configured.clone(),
    };
    let split: Split =
        choice.split.as_deref().unwrap_or("test").parse().map_err(
            |e: crate::domain::error::InvalidRequest| PageError::bad_request(e.to_string()),
        )?;
    let order = Order::parse(choice.sort.as_deref()).map_err(PageError::bad_request)?;
    let client = db::client(&state.app.pool).await?;
    let runs = quality::newest_per_version(&client, &digest, split).await?;
    let chosen = match choice.version.as_deref() {
        Some(v) => Some(
            runs.iter()
                .find(|r| r.version.to_string() == v)
                .ok_or_else(|| {
                    PageError::not_found(format!("no run of {v} on this set and split"))
                })?,
        ),
        None => runs.first(),
    };
    let texts = match chosen {
        Some(run) => {
            let ids: Vec<uuid::Uuid> = run
                .figures
                .misclassified
                .iter()
                .take(MISSES_SHOWN)
                .map(|m| m.ticket_id)
                .collect();
            quality::eval_ticket_texts(&client, &ids).await?
        }
        None => Default::default(),
    };
    // Runs under way, read only (a GET concludes nothing; the sweeper's tick does).
    let under_way = quality::under_way(&state.app.pool).await?;
    let live = feedback::agreement(&client).await?;
    let baseline = quality::baseline(&client, &digest, split).await?;
    let sweeps = quality::newest_per_cascade(&client, &digest).await?;
    let time_split = quality::newest_time_split(&client, configured_policy).await?;
    let audited = crate::quality::live::status(&state.app.pool, config).await?;
    let target = match config.versions.model.cascade() {
        Some(c) => match c.threshold.target() {
            Some(p) => targets::load(&client, &c.local, p).await?,
            None => None,
        },
        None => None,
    };
    let body = html! {
        (live::panel(audited.as_ref()))
        (by_time::lead(time_split.as_ref()))
        @if let Some(t) = &target {
            (by_time::configured_target(config.versions.model.as_str(), t))
        }
        p {
            "Set " code data-set=(digest) { (&digest[..12]) }
            @if digest == configured { " (the set " code { "promote" } " checks)" }
            ", split " strong { (split) } ". Runs come from "
            code { "triage eval --set shipped|s3://BUCKET/KEY|PATH --split " (split) " --version VERSION" }
            " (or the ops Lambda's " code { "{\"op\": \"eval\", \"set\": \"shipped\"}" } ")."
        }
        (agreement(&live))
        @if !under_way.is_empty() {
            table {
                caption { "Runs under way (stored here once every answer is in)" }
                thead { tr { th scope="col" { "Run" } th scope="col" { "Set" } th scope="col" { "Split" }
                             th scope="col" { "Versions" } th.num scope="col" { "Answered" }
                             th.num scope="col" { "Dead" } th.num scope="col" { "Of" } } }
                tbody {
                    @for (run, progress) in &under_way {
                        tr data-running=(run.id) {
                            td { code { (run.id) } } td { (run.set_source) }
                            td { (run.split.map_or("all".to_string(), |s| s.to_string())) }
                            td { (run.versions.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")) }
                            td.num data-answered=(run.id) { (progress.answered) }
                            td.num { (progress.dead) } td.num { (progress.total) }
                        }
                    }
                }
            }
        }
        @if runs.is_empty() {
            p.muted { "No eval run on this set and split yet." }
        } @else {
            (side_by_side(&runs, baseline.as_ref(), &digest, split))
        }
        (thresholds::sweeps(&sweeps))
        @if let Some(run) = chosen {
            (details(run, &texts, order, &digest, split))
        }
    };
    Ok(html_response(
        StatusCode::OK,
        page(Section::Quality, "Quality", body),
    ))
}

/// Live agreement with the help desk's feedback, per version, beside the offline runs.
fn agreement(live: &[Agreement]) -> Markup {
    let share = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.3}"));
    html! {
        h2 { "Agreement with the help desk (live)" }
        @if live.is_empty() {
            p.muted { "No feedback yet: the desk's labels arrive with "
                      code { "POST /tickets/{id}/feedback" } "." }
        } @else {
            table {
                thead { tr { th scope="col" { "Days" } th scope="col" { "Version" } th.num scope="col" { "n" }
                             th.num scope="col" { "Department accuracy" } th.num scope="col" { "Urgent precision" }
                             th.num scope="col" { "Urgent recall" } } }
                tbody {
                    @for a in live {
                        tr data-agreement=(format!("{}:{}/{}", a.window_days, a.prompt_version, a.model_version)) {
                            td { (a.window_days) } td { (a.prompt_version) "/" (a.model_version) }
                            td.num { (a.n) } td.num data-stat="department_accuracy" { (format!("{:.3}", a.department_accuracy)) }
                            td.num { (share(a.urgent_precision)) } td.num { (share(a.urgent_recall)) }
                        }
                    }
                }
            }
        }
    }
}

fn side_by_side(
    runs: &[StoredRun],
    baseline: Option<&RunFigures>,
    digest: &str,
    split: Split,
) -> Markup {
    type Figure = fn(&RunFigures) -> String;
    let rows: [(&str, &str, Figure); 12] = [
        ("n", "Rows / families", |f| match f.families {
            0 => format!("{} / –", f.n),
            families => format!("{} / {families}", f.n),
        }),
        ("accuracy", "Department accuracy [95% CI]", |f| {
            let d = &f.department;
            match d.accuracy_ci {
                Some([low, high]) => format!("{:.3} [{low:.3}, {high:.3}]", d.accuracy),
                // Stored before intervals by family: Wilson's, over rows.
                None => format!(
                    "{:.3} [{:.3}, {:.3}] (rows)",
                    d.accuracy, d.accuracy_ci95.low, d.accuracy_ci95.high
                ),
            }
        }),
        ("macro_f1", "Department macro-F1 [95% CI]", |f| {
            let d = &f.department;
            format!(
                "{:.3} [{:.3}, {:.3}]",
                d.macro_f1, d.macro_f1_ci95.low, d.macro_f1_ci95.high
            )
        }),
        ("urgent_precision", "Urgent precision", |f| {
            format!("{:.3}", f.urgent.precision)
        }),
        ("urgent_recall", "Urgent recall [95% CI]", |f| {
            match &f.urgent.recall_ci95 {
                Some(i) => format!("{:.3} [{:.3}, {:.3}]", f.urgent.recall, i.low, i.high),
                None => format!("{:.3}", f.urgent.recall),
            }
        }),
        ("brier", "Urgent Brier score", |f| {
            format!("{:.4}", f.urgent.brier)
        }),
        ("auc", "Urgent ROC AUC", |f| {
            optional(f.urgent.auc.map(|a| format!("{a:.3}")))
        }),
        ("cost_per_ticket", "Cost per ticket", |f| {
            usd(f.cost_per_ticket_usd)
        }),
        ("cost_per_correct", "Cost per correct triage", |f| {
            optional(f.cost_per_correct_usd.map(usd))
        }),
        ("local_share", "Answered locally (cascade)", |f| {
            format!("{:.3}", f.local_share)
        }),
        ("failures", "Contract violations / dead letters", |f| {
            format!("{} / {}", f.contract_violations, f.dead_letters)
        }),
        ("finished", "Run finished", |_| String::new()),
    ];
    // The offline floor, unless a version shown is the rules classifier already.
    let baseline = baseline.filter(|_| {
        !runs
            .iter()
            .any(|r| r.version.model_version.as_str() == ModelVersion::RULES)
    });
    html! {
        h2 { "Versions side by side" }
        table {
            thead { tr {
                th scope="col" { "Newest run of each version" }
                @for r in runs {
                    th.num scope="col" {
                        a href=(format!("/admin/quality?set={digest}&split={split}&version={}", r.version)) {
                            code { (r.version) }
                        }
                    }
                }
                @if let Some(b) = baseline {
                    th.num scope="col" data-baseline { code { (b.version) } }
                }
            } }
            tbody {
                @for (key, name, figure) in rows {
                    tr { th scope="row" { (name) }
                        @for r in runs {
                            td.num data-figure=(format!("{key}/{}", r.version)) {
                                @if key == "finished" {
                                    (r.finished_at.format("%Y-%m-%d %H:%M UTC").to_string())
                                } @else {
                                    (figure(&r.figures))
                                }
                            }
                        }
                        @if let Some(b) = baseline {
                            td.num data-figure=(format!("{key}/baseline")) {
                                @if key == "finished" { "answered offline" } @else { (figure(b)) }
                            }
                        }
                    }
                }
            }
        }
        @if baseline.is_some() {
            p.muted { "The baseline is the offline rules classifier (" code { "rules@offline" }
                      ") over the same rows, answered without a provider: the floor any version must clear. \
                       Intervals are 95% percentile bootstraps over scenario families." }
        }
    }
}

fn details(
    run: &StoredRun,
    texts: &std::collections::HashMap<uuid::Uuid, (String, String)>,
    order: Order,
    digest: &str,
    split: Split,
) -> Markup {
    let version = &run.version;
    let link = |sort: &str| {
        format!("/admin/quality?set={digest}&split={split}&version={version}&sort={sort}")
    };
    let confusion = &run.figures.department.confusion;
    let labels: Vec<String> = confusion.keys().cloned().collect();
    let mut answers: Vec<String> = confusion
        .values()
        .flat_map(|row| row.keys().cloned())
        .chain(labels.iter().cloned())
        .collect();
    answers.sort();
    answers.dedup();
    // "(none)" last: it is not a department.
    answers.sort_by_key(|a| a == NO_ANSWER);
    let count = |label: &str, answer: &str| {
        confusion
            .get(label)
            .and_then(|row| row.get(answer))
            .copied()
            .unwrap_or(0)
    };
    let misses = &run.figures.misclassified;
    html! {
        (classes::per_class(&run.figures.department.per_class, order, link))
        h2 { "Confusion of " code { (run.version) } }
        @if labels.len() > confusions::GRID_CLASSES {
            (classes::top_confusions(confusion, confusions::TOP_CONFUSIONS))
        } @else {
            (charts::heat_map(
                "Departments: rows the label, columns the answer; green the diagonal, red the errors, shaded by share of the row",
                &labels, &answers, count,
            ))
        }
        h2 { "Misclassified tickets (" (misses.len()) ")" }
        @if misses.is_empty() {
            p.ok { "Every ticket was answered right." }
        } @else {
            table.misses {
                thead { tr { th scope="col" { "Row" } th scope="col" { "Label" } th scope="col" { "Answer" } th scope="col" { "Ticket" } } }
                tbody {
                    @for miss in misses.iter().take(MISSES_SHOWN) {
                        tr data-miss=(miss.id) {
                            td.id { a href=(format!("/admin/tickets/{}", miss.ticket_id)) { (miss.id) } }
                            td { (miss.department) @if miss.is_urgent { ", urgent" } }
                            td {
                                (miss.predicted.as_deref().unwrap_or(NO_ANSWER))
                                @if let Some(p) = miss.predicted_urgent { ", p(urgent) " (format!("{p:.2}")) }
                            }
                            td {
                                @if let Some((subject, message)) = texts.get(&miss.ticket_id) {
                                    strong { (subject) } br;
                                    (message.chars().take(MESSAGE_SHOWN).collect::<String>())
                                    @if message.chars().count() > MESSAGE_SHOWN { "…" }
                                } @else {
                                    span.muted { "erased" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
