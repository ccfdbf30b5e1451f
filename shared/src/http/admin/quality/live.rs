//! The Quality page's live precision (docs/quality.md, "Live precision"): the configured
//! cascade's audited precision with its exact 95% interval, its target, its local share and
//! whether it is suspended, and a line over the days of the window with the interval as its
//! band, drawn on the server as inline SVG.

use maud::{html, Markup};

use crate::quality::live::{Live, Share};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 140.0;

pub(super) fn panel(live: Option<&Live>) -> Markup {
    let Some(live) = live else {
        return html! {};
    };
    let share = |s: Option<f64>| s.map_or("–".to_string(), |s| format!("{s:.3}"));
    html! {
        h2 { "Live precision (the cascade's audit)" }
        p {
            "A random " (format!("{:.1}%", live.audit_share * 100.0))
            " of the tickets " code { (live.model_version) } " would answer locally are answered by the large model too, since "
            (live.since.format("%Y-%m-%d %H:%M UTC")) ". Truth: " (live.truth) "."
        }
        @if live.suspended {
            p.warning data-live="suspended" {
                strong { "Suspended: " } (live.reason.clone().unwrap_or_default())
                ". Every ticket goes to the large model until " code { "triage cascade resume --reason R" } "."
            }
        }
        table {
            thead { tr { th.num scope="col" { "Audited" } th.num scope="col" { "Precision" }
                         th.num scope="col" { "95% exact interval" } th.num scope="col" { "Target" }
                         th.num scope="col" { "Local share" } } }
            tbody { tr {
                td.num data-live="audited" { (live.audited) }
                td.num data-live="precision" { (share(live.precision)) }
                td.num data-live="interval" { (format!("[{:.3}, {:.3}]", live.interval[0], live.interval[1])) }
                td.num data-live="target" { (live.target) }
                td.num data-live="local_share" { (share(live.local_share)) }
            } }
        }
        @if !live.by_day.is_empty() {
            (line(&live.by_day, live.target))
        }
    }
}

/// Precision per day as a line, its exact interval as a band, the target as a dashed rule.
fn line(days: &[Share], target: f64) -> Markup {
    let step = WIDTH / days.len().max(2).saturating_sub(1) as f64;
    let x = |i: usize| {
        if days.len() == 1 {
            WIDTH / 2.0
        } else {
            i as f64 * step
        }
    };
    let y = |p: f64| (1.0 - p) * (HEIGHT - 20.0) + 4.0;
    let points = |value: &dyn Fn(&Share) -> f64| -> Vec<String> {
        days.iter()
            .enumerate()
            .map(|(i, d)| format!("{:.1},{:.1}", x(i), y(value(d))))
            .collect()
    };
    let high = points(&|d| d.interval[1]);
    let mut low = points(&|d| d.interval[0]);
    low.reverse();
    let band = [high, low].concat().join(" ");
    html! {
        figure.chart {
            figcaption { "Audited precision per day, with its 95% exact interval; dashed: the target" }
            svg role="img" viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) width="100%"
                aria-label="audited precision per day" data-live="line" {
                polygon class="band" points=(band) {}
                line class="target" x1="0" x2=(WIDTH) y1=(format!("{:.1}", y(target)))
                     y2=(format!("{:.1}", y(target))) stroke-dasharray="4 3" {}
                polyline class="line" fill="none" points=(points(&|d| d.precision).join(" ")) {}
                @for (i, d) in days.iter().enumerate() {
                    circle cx=(format!("{:.1}", x(i))) cy=(format!("{:.1}", y(d.precision))) r="3"
                           data-day=(d.group) {
                        title { (d.group) ": " (format!("{:.3}", d.precision)) " over " (d.audited)
                                " [" (format!("{:.3}", d.interval[0])) ", " (format!("{:.3}", d.interval[1])) "]" }
                    }
                    text x=(format!("{:.1}", x(i))) y=(HEIGHT - 2.0) text-anchor="middle" { (d.group) }
                }
            }
        }
    }
}
