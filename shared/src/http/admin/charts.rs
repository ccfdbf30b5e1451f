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

/// One point of a [`trade_off`] chart.
pub struct Dot {
    /// In [0, 1].
    pub x: f64,
    pub y: f64,
    /// Written beside the point.
    pub label: String,
    /// What a tooltip and a screen reader say for this point.
    pub text: String,
    /// Drawn larger: the one chosen.
    pub highlight: bool,
}

/// Points joined in order of `x` (a share, 0 to 1), `y` scaled to the points' range in steps
/// of 0.05, each labelled; `reference` a dashed level with its name (e.g. the large model
/// alone).
pub fn trade_off(
    title: &str,
    (x_name, y_name): (&str, &str),
    dots: &[Dot],
    reference: Option<(f64, &str)>,
) -> Markup {
    const W: f64 = 720.0;
    const H: f64 = 280.0;
    const LEFT: f64 = 56.0;
    const RIGHT: f64 = 24.0;
    const TOP: f64 = 16.0;
    const BOTTOM: f64 = 44.0;
    let ys = dots.iter().map(|d| d.y).chain(reference.map(|r| r.0));
    let (low, high) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), y| {
        (l.min(y), h.max(y))
    });
    let (low, high) = if low.is_finite() {
        let low = ((low - 0.005) * 20.0).floor() / 20.0;
        (
            low.max(0.0),
            (((high + 0.005) * 20.0).ceil() / 20.0).max(low + 0.05),
        )
    } else {
        (0.0, 1.0)
    };
    let x_at = |x: f64| LEFT + x.clamp(0.0, 1.0) * (W - LEFT - RIGHT);
    let y_at = |y: f64| TOP + (high - y) / (high - low) * (H - TOP - BOTTOM);
    let mut sorted: Vec<&Dot> = dots.iter().collect();
    sorted.sort_by(|a, b| a.x.total_cmp(&b.x).then(b.y.total_cmp(&a.y)));
    let path: Vec<String> = sorted
        .iter()
        .map(|d| format!("{:.1},{:.1}", x_at(d.x), y_at(d.y)))
        .collect();
    let steps = ((high - low) / 0.05).round() as usize;
    let every = steps.div_ceil(6).max(1);
    html! {
        figure.chart.trade-off {
            figcaption { (title) }
            svg role="img" viewBox=(format!("0 0 {W} {H}")) width="100%" aria-label=(title) {
                line x1=(LEFT) y1=(H - BOTTOM) x2=(W - RIGHT) y2=(H - BOTTOM) class="axis" {}
                line x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(H - BOTTOM) class="axis" {}
                @for i in 0..=4 {
                    @let x = f64::from(i) / 4.0;
                    text x=(format!("{:.1}", x_at(x))) y=(H - BOTTOM + 14.0) text-anchor="middle" { (format!("{x:.2}")) }
                }
                text x=(format!("{:.1}", (LEFT + W - RIGHT) / 2.0)) y=(H - 6.0) text-anchor="middle" { (x_name) }
                @for i in (0..=steps).step_by(every) {
                    @let y = low + i as f64 * 0.05;
                    text x=(LEFT - 6.0) y=(format!("{:.1}", y_at(y) + 4.0)) text-anchor="end" { (format!("{y:.2}")) }
                }
                text x="12" y=(format!("{:.1}", (TOP + H - BOTTOM) / 2.0)) text-anchor="middle"
                     transform=(format!("rotate(-90 12 {:.1})", (TOP + H - BOTTOM) / 2.0)) { (y_name) }
                @if let Some((level, name)) = reference {
                    line x1=(LEFT) y1=(format!("{:.1}", y_at(level))) x2=(W - RIGHT) y2=(format!("{:.1}", y_at(level)))
                         stroke="#4a4a4a" stroke-dasharray="4 4" data-reference=(format!("{level:.3}")) {}
                    text x=(W - RIGHT) y=(format!("{:.1}", y_at(level) - 4.0)) text-anchor="end" { (name) " " (format!("{level:.3}")) }
                }
                polyline points=(path.join(" ")) fill="none" stroke="#2f5f98" stroke-width="1.5" {}
                @for d in &sorted {
                    g data-dot=(d.label) {
                        circle cx=(format!("{:.1}", x_at(d.x))) cy=(format!("{:.1}", y_at(d.y)))
                               r=(if d.highlight { "6" } else { "3.5" })
                               fill=(if d.highlight { "#a4000f" } else { "#2f5f98" }) {
                            title { (d.label) ": " (d.text) }
                        }
                        @let (dx, anchor) = if d.x > 0.85 { (-6.0, "end") } else { (6.0, "start") };
                        text x=(format!("{:.1}", x_at(d.x) + dx)) y=(format!("{:.1}", y_at(d.y) - 6.0))
                             text-anchor=(anchor) { (d.label) }
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
    fn a_trade_off_places_each_point_by_its_share_and_its_level_and_labels_it() {
        let dot = |x: f64, y: f64, label: &str, highlight| Dot {
            x,
            y,
            label: label.into(),
            text: format!("{y}"),
            highlight,
        };
        let dots = [
            dot(0.0, 0.9, "1.00", false),
            dot(0.5, 0.88, "0.80", true),
            dot(1.0, 0.7, "<0>", false),
        ];
        let svg = trade_off("t", ("x", "y"), &dots, Some((0.9, "alone"))).into_string();
        // y from 0.65 to 0.95 (a step's room around the points) over 236..16; x over 56..696.
        assert!(svg.contains(r#"cx="56.0" cy="52.7""#), "{svg}");
        assert!(svg.contains(r#"cx="376.0" cy="67.3""#), "{svg}");
        assert!(svg.contains(r#"cx="696.0" cy="199.3""#), "{svg}");
        assert!(svg.contains(r#"points="56.0,52.7 376.0,67.3 696.0,199.3""#));
        assert!(svg.contains(r#"y="20.0" text-anchor="end">0.95<"#));
        assert!(
            svg.contains(r##"r="6" fill="#a4000f""##),
            "the chosen one stands out"
        );
        assert!(svg.contains(r#"data-reference="0.900""#));
        assert!(svg.contains("&lt;0&gt;") && !svg.contains("<0>"));
    }

    #[test]
    fn labels_are_escaped() {
        let svg = bars("<b>", &[bar("<i>", 1.0)], |v| format!("{v}")).into_string();
        assert!(!svg.contains("<b>") && !svg.contains("<i>"));
    }
}
