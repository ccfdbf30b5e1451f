//! Bar charts as inline SVG, drawn on the server: no script, nothing fetched. Each chart has
//! a title and a description for screen readers, and each bar a `<title>` with its value.

use maud::{html, Markup};

pub struct Bar {
    pub label: String,
    pub value: f64,
    /// What a tooltip and a screen reader say for this bar.
    pub text: String,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 120.0;
const AXIS: f64 = 20.0;

/// Vertical bars scaled to the largest value; `unit` formats the top of the scale.
pub fn bars(title: &str, bars: &[Bar], unit: impl Fn(f64) -> String) -> Markup {
    let max = bars.iter().map(|b| b.value).fold(0.0, f64::max);
    let slot = WIDTH / bars.len().max(1) as f64;
    let plot = HEIGHT - AXIS;
    let total: f64 = bars.iter().map(|b| b.value).sum();
    // At most about eight labels, so they never overlap.
    let every = bars.len().div_ceil(8).max(1);
    html! {
        figure.chart {
            figcaption { (title) " — total " (unit(total)) ", peak " (unit(max)) }
            svg role="img" viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) width="100%"
                aria-label=(format!("{title}: total {}", unit(total))) {
                line x1="0" y1=(plot) x2=(WIDTH) y2=(plot) class="axis" {}
                @for (i, bar) in bars.iter().enumerate() {
                    @let h = if max > 0.0 { bar.value / max * (plot - 4.0) } else { 0.0 };
                    rect x=(format!("{:.1}", i as f64 * slot + 1.0)) y=(format!("{:.1}", plot - h))
                         width=(format!("{:.1}", (slot - 2.0).max(1.0))) height=(format!("{h:.1}")) {
                        title { (bar.label) ": " (bar.text) }
                    }
                    @if i % every == 0 {
                        text x=(format!("{:.1}", i as f64 * slot + slot / 2.0)) y=(HEIGHT - 5.0)
                             text-anchor="middle" { (bar.label) }
                    }
                }
            }
        }
    }
}

/// A confusion matrix as a heat map: rows are labels, columns answers, each cell shaded by
/// its share of the row (so a small class reads as clearly as a large one) and titled with its
/// count.
pub fn heat_map(
    title: &str,
    rows: &[String],
    columns: &[String],
    count: impl Fn(&str, &str) -> u64,
) -> Markup {
    const CELL: f64 = 56.0;
    const LEFT: f64 = 90.0;
    const TOP: f64 = 40.0;
    let width = LEFT + CELL * columns.len() as f64;
    let height = TOP + CELL * rows.len() as f64;
    html! {
        figure.chart.heat {
            figcaption { (title) }
            svg role="img" viewBox=(format!("0 0 {width} {height}")) width=(format!("{width}"))
                aria-label=(title) {
                @for (j, column) in columns.iter().enumerate() {
                    text x=(format!("{:.1}", LEFT + CELL * j as f64 + CELL / 2.0)) y=(TOP - 8.0)
                         text-anchor="middle" { (column) }
                }
                @for (i, row) in rows.iter().enumerate() {
                    @let total: u64 = columns.iter().map(|c| count(row, c)).sum();
                    text x=(LEFT - 6.0) y=(format!("{:.1}", TOP + CELL * i as f64 + CELL / 2.0 + 4.0))
                         text-anchor="end" { (row) }
                    @for (j, column) in columns.iter().enumerate() {
                        @let n = count(row, column);
                        @let share = if total > 0 { n as f64 / total as f64 } else { 0.0 };
                        @let diagonal = row == column;
                        g data-cell=(format!("{row}/{column}")) {
                            rect x=(format!("{:.1}", LEFT + CELL * j as f64)) y=(format!("{:.1}", TOP + CELL * i as f64))
                                 width=(CELL - 2.0) height=(CELL - 2.0)
                                 class=(if diagonal { "right" } else { "wrong" })
                                 fill-opacity=(format!("{:.2}", 0.08 + 0.92 * share)) {
                                title { (row) " answered " (column) ": " (n) " of " (total) }
                            }
                            text x=(format!("{:.1}", LEFT + CELL * j as f64 + CELL / 2.0 - 1.0))
                                 y=(format!("{:.1}", TOP + CELL * i as f64 + CELL / 2.0 + 4.0))
                                 text-anchor="middle" class=(if share > 0.5 { "on-dark" } else { "" }) { (n) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(label: &str, value: f64) -> Bar {
        Bar {
            label: label.into(),
            value,
            text: format!("{value}"),
        }
    }

    #[test]
    fn the_largest_bar_fills_the_plot_and_an_empty_chart_draws_no_height() {
        let svg = bars("calls", &[bar("00", 2.0), bar("01", 4.0)], |v| {
            format!("{v}")
        })
        .into_string();
        assert!(svg.contains(r#"height="96.0""#), "{svg}");
        assert!(svg.contains(r#"height="48.0""#), "{svg}");
        assert!(svg.contains("total 6, peak 4"));
        let empty = bars("calls", &[bar("00", 0.0)], |v| format!("{v}")).into_string();
        assert!(empty.contains(r#"height="0.0""#), "{empty}");
    }

    #[test]
    fn a_heat_map_shades_each_cell_by_its_share_of_the_row() {
        let rows = vec!["billing".to_string(), "sales".to_string()];
        let svg = heat_map("confusion", &rows, &rows, |r, c| match (r, c) {
            ("billing", "billing") => 3,
            ("billing", "sales") => 1,
            _ => 0,
        })
        .into_string();
        assert!(svg.contains(r#"fill-opacity="0.77""#), "3 of 4: {svg}");
        assert!(svg.contains(r#"fill-opacity="0.31""#), "1 of 4");
        assert!(svg.contains("billing answered sales: 1 of 4"));
        assert!(svg.contains(r#"data-cell="sales/sales""#));
    }

    #[test]
    fn labels_are_escaped() {
        let svg = bars("<b>", &[bar("<i>", 1.0)], |v| format!("{v}")).into_string();
        assert!(!svg.contains("<b>") && !svg.contains("<i>"));
    }
}
