//! The Quality page's per-department figures, readable whatever the taxonomy's size: one row
//! per department sorted (by support, or by F1 with the worst first), and, past
//! [`HEAT_MAP_CLASSES`] departments, the most frequent confusions as a list instead of an
//! N×N grid that no one can read at 77 classes.

use std::collections::BTreeMap;

use maud::{html, Markup};

use crate::quality::view::{ClassFigures, NO_ANSWER};

/// Up to this many departments the confusion is a heat map; beyond, the top pairs.
pub(super) const HEAT_MAP_CLASSES: usize = 12;
/// Confusions listed when there are too many departments for a grid.
pub(super) const TOP_CONFUSIONS: usize = 20;

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
    let mut pairs: Vec<(&str, &str, u64, u64)> = confusion
        .iter()
        .flat_map(|(label, row)| {
            let rows: u64 = row.values().sum();
            row.iter()
                .filter(move |(answer, count)| *answer != label && **count > 0)
                .map(move |(answer, count)| (label.as_str(), answer.as_str(), *count, rows))
        })
        .collect();
    let errors: u64 = pairs.iter().map(|p| p.2).sum();
    pairs.sort_by(|a, b| b.2.cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
    html! {
        p.muted { (confusion.len()) " departments: the " (pairs.len().min(n))
                  " most frequent confusions of " (pairs.len()) " (" (errors) " wrong rows), not the full grid." }
        table data-top-confusions {
            thead { tr { th scope="col" { "Label" } th scope="col" { "Answered" } th.num scope="col" { "Rows" }
                         th.num scope="col" { "Share of the label's rows" } } }
            tbody {
                @for (label, answer, count, rows) in pairs.iter().take(n) {
                    tr data-confusion=(format!("{label}/{answer}")) {
                        td { code { (label) } }
                        td { @if *answer == NO_ANSWER { span.muted { (answer) } } @else { code { (answer) } } }
                        td.num { (count) } td.num { (format!("{:.0}%", 100.0 * *count as f64 / *rows as f64)) }
                    }
                }
            }
        }
    }
}
