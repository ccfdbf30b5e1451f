//! The Quality page's per-department figures, readable whatever the taxonomy's size: one row
//! per department sorted (by support, or by F1 with the worst first), and, past
//! [`confusions::GRID_CLASSES`] departments, the most frequent confusions as a list instead of an
//! N×N grid that no one can read at 77 classes.

use std::collections::BTreeMap;

use maud::{html, Markup};

use crate::quality::view::{confusions, ClassFigures, NO_ANSWER};

/// How the per-department table is ordered (`?sort=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// Most rows first: where the figures mean most.
    Support,
    /// Lowest F1 first: where the version is worst.
    F1,
}

impl Order {
    pub(super) fn parse(value: Option<&str>) -> Result<Self, &'static str> {
        match value {
            None | Some("support") => Ok(Order::Support),
            Some("f1") => Ok(Order::F1),
            Some(_) => Err("sort: support or f1"),
        }
    }
}

/// Per department: support, precision, recall, F1, sorted by `order` (ties by name).
pub(super) fn per_class(
    classes: &BTreeMap<String, ClassFigures>,
    order: Order,
    link: impl Fn(&str) -> String,
) -> Markup {
    let mut rows: Vec<(&String, &ClassFigures)> = classes.iter().collect();
    match order {
        Order::Support => rows.sort_by(|a, b| b.1.support.cmp(&a.1.support).then(a.0.cmp(b.0))),
        Order::F1 => rows.sort_by(|a, b| a.1.f1.total_cmp(&b.1.f1).then(a.0.cmp(b.0))),
    }
    let (by, other, other_name) = match order {
        Order::Support => ("support, most rows first", "f1", "lowest F1 first"),
        Order::F1 => ("F1, lowest first", "support", "most rows first"),
    };
    html! {
        h2 { "Per department (" (rows.len()) ")" }
        p.muted { "Sorted by " (by) "; " a href=(link(other)) data-sort=(other) { (other_name) } "." }
        table data-per-class {
            thead { tr { th scope="col" { "Department" } th.num scope="col" { "Support" }
                         th.num scope="col" { "Precision" } th.num scope="col" { "Recall" }
                         th.num scope="col" { "F1" } } }
            tbody {
                @for (name, c) in rows {
                    tr data-class=(name) {
                        td { code { (name) } } td.num { (c.support) }
                        td.num { (format!("{:.3}", c.precision)) } td.num { (format!("{:.3}", c.recall)) }
                        td.num data-f1 { (format!("{:.3}", c.f1)) }
                    }
                }
            }
        }
    }
}

/// The `n` most frequent errors, label → answer, with their share of the label's rows.
pub(super) fn top_confusions(
    confusion: &BTreeMap<String, BTreeMap<String, u64>>,
    n: usize,
) -> Markup {
    let pairs = confusions::ranked(confusion);
    let errors: u64 = pairs.iter().map(|c| c.rows).sum();
    html! {
        p.muted { (confusion.len()) " departments: the " (pairs.len().min(n))
                  " most frequent confusions of " (pairs.len()) " (" (errors) " wrong rows), not the full grid." }
        table data-top-confusions {
            thead { tr { th scope="col" { "Label" } th scope="col" { "Answered" } th.num scope="col" { "Rows" }
                         th.num scope="col" { "Share of the label's rows" } } }
            tbody {
                @for c in pairs.iter().take(n) {
                    tr data-confusion=(format!("{}/{}", c.label, c.answer)) {
                        td { code { (c.label) } }
                        td { @if c.answer == NO_ANSWER { span.muted { (c.answer) } } @else { code { (c.answer) } } }
                        td.num { (c.rows) } td.num { (format!("{:.0}%", 100.0 * c.rows as f64 / c.label_rows as f64)) }
                    }
                }
            }
        }
    }
}
