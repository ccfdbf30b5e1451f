//! The Quality page's cascades: the newest threshold sweep of each (`triage eval
//! --thresholds`, on the set's dev split) drawn as department accuracy against the share the
//! local classifier answers, each point labelled by its threshold, and listed.

use maud::{html, Markup};

use super::super::{
    charts::{self, Dot},
    layout::usd,
};
use crate::quality::view::StoredSweep;

pub(super) fn sweeps(sweeps: &[StoredSweep]) -> Markup {
    html! {
        h2 { "Cascade thresholds (dev split)" }
        @if sweeps.is_empty() {
            p.muted { "No threshold sweep on this set yet: "
                      code { "triage eval --set shipped --thresholds --version PROMPT/cascade(local-…,THRESHOLD,MODEL@EFFORT)" } "." }
        }
        @for sweep in sweeps {
            (one(sweep))
        }
    }
}

fn one(sweep: &StoredSweep) -> Markup {
    let version = sweep.version.to_string();
    let dots: Vec<Dot> = sweep
        .points
        .iter()
        .map(|p| Dot {
            x: p.local_share,
            y: p.department_accuracy,
            label: format!("{:.2}", p.threshold),
            text: format!(
                "{:.3} answered locally, accuracy {:.3}, {} per ticket",
                p.local_share,
                p.department_accuracy,
                usd(p.cost_per_ticket_usd)
            ),
            highlight: p.named,
        })
        .collect();
    // The large model alone: the point where the classifier answers nothing.
    let alone = sweep
        .points
        .iter()
        .filter(|p| p.local_share == 0.0)
        .map(|p| p.department_accuracy)
        .next_back();
    let title = format!(
        "{version}: department accuracy against the share answered locally, each point a \
         threshold (the cascade's in red)"
    );
    let interval =
        |ci: Option<[f64; 2]>| ci.map_or(String::new(), |[l, h]| format!(" [{l:.3}, {h:.3}]"));
    html! {
        section data-sweep=(version) {
            h3 { code { (version) } }
            p.muted { "Swept " (sweep.created_at.format("%Y-%m-%d %H:%M UTC").to_string()) " by " (sweep.run_by)
                      " on " (sweep.split) ". Read it from right to left: the classifier answers fewer tickets as the threshold rises, \
                       and the large model (paid) the rest. Choose the lowest threshold whose accuracy you accept, \
                       then evaluate that cascade on the test split before promoting it." }
            (charts::trade_off(
                &title,
                ("share answered locally", "department accuracy"),
                &dots,
                alone.map(|a| (a, "large model alone")),
            ))
            table {
                thead { tr { th.num scope="col" { "Threshold" } th.num scope="col" { "Answered locally" }
                             th.num scope="col" { "Department accuracy [95% CI]" } th.num scope="col" { "Urgent recall" }
                             th.num scope="col" { "Cost per ticket" } th.num scope="col" { "Cost per correct triage" } } }
                tbody {
                    @for p in &sweep.points {
                        tr data-point=(format!("{version}@{:.2}", p.threshold)) {
                            td.num { (format!("{:.2}", p.threshold)) @if p.named { " (the cascade's)" } }
                            td.num data-stat="local_share" { (format!("{:.3}", p.local_share)) }
                            td.num data-stat="department_accuracy" {
                                (format!("{:.3}", p.department_accuracy)) (interval(p.department_accuracy_ci))
                            }
                            td.num { (format!("{:.3}", p.urgent_recall)) }
                            td.num data-stat="cost_per_ticket" { (usd(p.cost_per_ticket_usd)) }
                            td.num data-stat="cost_per_correct" { (p.cost_per_correct_usd.map_or("–".to_string(), usd)) }
                        }
                    }
                }
            }
        }
    }
}
