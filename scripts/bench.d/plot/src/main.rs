//! `bench-plot SERIES.csv OUT.png [FONT.ttf]`: queue depth and calls per second over time for
//! each run of `scripts/bench scale`. SERIES.csv has `run,second,queue_depth,calls,refused`
//! rows. Without a readable font the axes carry no labels.

use std::{collections::BTreeMap, error::Error, fs};

use plotters::prelude::*;

type Series = BTreeMap<String, Vec<(f64, f64, f64, f64)>>;

fn read(path: &str) -> Result<Series, Box<dyn Error>> {
    let mut runs = Series::new();
    for line in fs::read_to_string(path)?.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let [run, second, depth, calls, refused] = fields[..] else {
            return Err(format!("bad row {line:?}").into());
        };
        runs.entry(run.to_owned()).or_default().push((
            second.parse()?,
            depth.parse()?,
            calls.parse()?,
            refused.parse()?,
        ));
    }
    Ok(runs)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(input), Some(output)) = (args.get(1), args.get(2)) else {
        return Err("usage: bench-plot SERIES.csv OUT.png [FONT.ttf]".into());
    };
    let labels = args
        .get(3)
        .and_then(|font| fs::read(font).ok())
        .map(|bytes| {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
        })
        .unwrap_or(false);
    let runs = read(input)?;
    let max = |pick: fn(&(f64, f64, f64, f64)) -> f64| {
        runs.values().flatten().map(pick).fold(1.0, f64::max)
    };
    let (seconds, depth, calls) = (max(|r| r.0), max(|r| r.1), max(|r| r.2 + r.3));
    let root = BitMapBackend::new(output, (1000, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(350);
    let colours = [BLUE, RED, GREEN, MAGENTA];
    for (area, title, y_max, value) in [
        (&top, "queue depth (pending + processing)", depth, 1usize),
        (&bottom, "calls per second (dashed: answered 429)", calls, 2),
    ] {
        let mut chart = ChartBuilder::on(area);
        chart.margin(10);
        if labels {
            chart
                .caption(title, ("sans-serif", 18))
                .x_label_area_size(30)
                .y_label_area_size(60);
        }
        let mut chart = chart.build_cartesian_2d(0.0..seconds, 0.0..y_max * 1.05)?;
        let mut mesh = chart.configure_mesh();
        if labels {
            mesh.x_desc("seconds");
        } else {
            mesh.disable_x_mesh().disable_y_mesh();
        }
        mesh.draw()?;
        for ((run, rows), colour) in runs.iter().zip(colours) {
            let pick = |r: &(f64, f64, f64, f64)| if value == 1 { r.1 } else { r.2 };
            let line = chart.draw_series(LineSeries::new(
                rows.iter().map(|r| (r.0, pick(r))),
                colour.stroke_width(2),
            ))?;
            if labels {
                line.label(run.as_str()).legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            }
            if value == 2 {
                chart.draw_series(DashedLineSeries::new(
                    rows.iter().map(|r| (r.0, r.3)),
                    4,
                    4,
                    colour.stroke_width(1),
                ))?;
            }
        }
        if labels {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}
