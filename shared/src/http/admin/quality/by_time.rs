//! The Quality page's lead (`triage eval --by-time`, docs/quality.md "Judged as production
//! runs"): the newest time split, the cascade against the large model on the same production
//! tickets, for each truth apart, and the classifier's risk–coverage curves (precision of its
//! answers against the share it answers) on the judged tickets and, with a target, out of fold
//! on the training window, the derived thresholds' point in red.

use maud::{html, Markup};

use super::super::{
    charts::{self, Dot},
    layout::usd,
};
use crate::{
    providers::classifier::target::{CurvePoint, Thresholds},
    quality::view::{Slice, StoredTimeSplit},
};

pub(super) fn lead(split: Option<&StoredTimeSplit>) -> Markup {
    let Some(stored) = split else {
        return html! {
            h2 { "Judged as production runs" }
            p.muted { "No time split yet: " code { "triage eval --by-time --precision 0.97" }
                      " trains a classifier on the traffic before a point in time and judges the cascade on the tickets after it." }
        };
    };
    let r = &stored.report;
    let cost = |x: Option<f64>| x.map_or("–".to_string(), usd);
    let row = |key: &str, name: &str, s: &Slice| {
        html! {
            tr data-truth=(key) {
                th scope="row" { (name) }
                td.num data-stat="n" { (s.n) }
                td.num data-stat="local_share" { (format!("{:.3}", s.local_share)) }
                td.num data-stat="local_precision" { (s.local_precision.map_or("–".into(), |p| format!("{p:.3}"))) }
                td.num data-stat="cascade_accuracy" { (format!("{:.3}", s.cascade_accuracy)) }
                td.num data-stat="large_accuracy" { (format!("{:.3}", s.large_accuracy)) }
                td.num data-stat="difference" { (format!("{:+.3} [{:+.3}, {:+.3}]", s.difference, s.difference_ci95.low, s.difference_ci95.high)) }
                td.num { (usd(s.cascade_cost_per_ticket_usd)) " / " (usd(s.large_cost_per_ticket_usd)) }
                td.num { (cost(s.cascade_cost_per_correct_usd)) " / " (cost(s.large_cost_per_correct_usd)) }
            }
        }
    };
    let rule = match r.rule {
        crate::quality::by_time::Rule::Threshold(t) => format!("confidence at least {t}"),
        crate::quality::by_time::Rule::Precision(p) => {
            format!("the thresholds keeping precision {p}, per department")
        }
    };
    let derived = r.thresholds.as_ref().map(|t| (t.coverage, t.precision));
    html! {
        h2 { "Judged as production runs" }
        section data-time-split=(stored.id) {
            p { "Trained on " (r.trained_from.format("%Y-%m-%d").to_string()) " to " (r.at.format("%Y-%m-%d %H:%M").to_string())
                " (" (r.examples) " examples: " (r.from_results) " of the model's answers, " (r.from_feedback) " of the desk's labels); judged on the production tickets of "
                (r.at.format("%Y-%m-%d %H:%M").to_string()) " to " (r.until.format("%Y-%m-%d %H:%M").to_string()) ". Cascade: "
                code { (r.local) } " answering at " (rule) ", else " code { (r.model_version) } "'s stored answer. No provider call." }
            table {
                thead { tr { th scope="col" { "Truth" } th.num scope="col" { "Tickets" } th.num scope="col" { "Answered locally" }
                             th.num scope="col" { "Local precision" } th.num scope="col" { "Cascade accuracy" }
                             th.num scope="col" { "Large model accuracy" } th.num scope="col" { "Difference [95% CI]" }
                             th.num scope="col" { "Cost per ticket (cascade / large)" } th.num scope="col" { "Per correct triage" } } }
                tbody {
                    (row("all", "all", &r.all))
                    (row("desk", "the desk's label", &r.desk))
                    @if let Some(audit) = &r.audit {
                        (row("audit", "the audit's answer (drawn at random)", audit))
                    }
                    @if let Some(graded) = &r.graded {
                        (row("graded", "desk and audit (each audit weighing 1 / its share): the precision that judges", graded))
                    }
                    (row("model", "the large model's own answer (grading itself)", &r.model))
                }
            }
            p.muted { "Where no labeller labelled a ticket, the truth is the large model's own answer: there it is right by definition, and the row says how often the cascade agrees with it. Run "
                      (stored.created_at.format("%Y-%m-%d %H:%M UTC").to_string()) " by " (stored.run_by) "." }
            (curve("on the judged tickets", &r.curve, None))
            @if let Some(t) = &r.thresholds {
                (curve("out of fold, on the training window", &t.curve, derived))
            }
        }
    }
}

/// A risk–coverage curve: precision of the local answers against the share answered locally,
/// each point a threshold; `derived` the derived thresholds' own point, in red.
fn curve(on: &str, points: &[CurvePoint], derived: Option<(f64, Option<f64>)>) -> Markup {
    let mut dots: Vec<Dot> = points
        .iter()
        .filter_map(|p| {
            let precision = p.precision?;
            Some(Dot {
                x: p.coverage,
                y: precision,
                label: format!("{:.2}", p.threshold),
                text: format!(
                    "threshold {:.2}: {:.3} answered locally at precision {precision:.3}",
                    p.threshold, p.coverage
                ),
                highlight: false,
            })
        })
        .collect();
    if let Some((coverage, Some(precision))) = derived {
        dots.push(Dot {
            x: coverage,
            y: precision,
            label: "target".into(),
            text: format!("the derived thresholds: {coverage:.3} answered locally at precision {precision:.3}"),
            highlight: true,
        });
    }
    let title = format!(
        "Risk–coverage {on}: precision of local answers against the share answered locally"
    );
    html! {
        h3 { "Risk–coverage " (on) }
        @if dots.is_empty() {
            p.muted { "The classifier answered none of these tickets at any threshold." }
        } @else {
            (charts::trade_off(&title, ("share answered locally", "precision of local answers"), &dots, None))
        }
    }
}

/// The configured cascade's target (`cascade(local-…,pP,…)`): its thresholds per department and
/// their risk–coverage curve out of fold, as `triage train --precision` derived them.
pub(super) fn configured_target(version: &str, t: &Thresholds) -> Markup {
    let at = |t: Option<f64>| t.map_or("never local".to_string(), |t| format!("{t:.3}"));
    html! {
        h2 { "The configured cascade's target" }
        section data-target=(format!("{version}@p{}", t.target)) {
            p { code { (version) } " answers locally at the thresholds keeping precision " (t.target)
                ", cross-fitted over " (t.folds) " folds of its " (t.rows) " examples: out of fold it answers "
                (format!("{:.1}%", 100.0 * t.coverage)) " of them, at precision "
                (t.precision.map_or("–".to_string(), |p| format!("{p:.3}"))) "." }
            table {
                thead { tr { th scope="col" { "Department" } th.num scope="col" { "Threshold" } } }
                tbody {
                    @for (department, own) in &t.departments {
                        tr { td { (department) } td.num { (at(*own)) } }
                    }
                    tr { td { "(every other)" } td.num { (at(t.global)) } }
                }
            }
            (curve("out of fold, on its training examples", &t.curve, Some((t.coverage, t.precision))))
        }
    }
}
