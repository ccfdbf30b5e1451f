//! `triage eval --by-time`: the cascade judged on the deployment's own traffic, split by time.

use triage::quality::view::{Slice, TimeSplit};

use super::{cascade::thresholds, pairs, table};

fn usd(x: f64) -> String {
    format!("${x:.6}")
}

fn row(name: &str, s: &Slice) -> [String; 9] {
    let per_correct = |x: Option<f64>| x.map_or("–".into(), usd);
    [
        name.to_string(),
        s.n.to_string(),
        format!("{:.3}", s.local_share),
        s.local_precision.map_or("–".into(), |p| format!("{p:.3}")),
        format!("{:.3}", s.cascade_accuracy),
        format!("{:.3}", s.large_accuracy),
        format!(
            "{:+.3} [{:+.3}, {:+.3}]",
            s.difference, s.difference_ci95.low, s.difference_ci95.high
        ),
        format!(
            "{} / {}",
            usd(s.cascade_cost_per_ticket_usd),
            usd(s.large_cost_per_ticket_usd)
        ),
        format!(
            "{} / {}",
            per_correct(s.cascade_cost_per_correct_usd),
            per_correct(s.large_cost_per_correct_usd)
        ),
    ]
}

pub(super) fn report(r: &TimeSplit) -> String {
    let rule = match r.rule {
        triage::quality::by_time::Rule::Threshold(t) => format!("confidence ≥ {t}"),
        triage::quality::by_time::Rule::Precision(p) => {
            format!("thresholds keeping precision {p}")
        }
    };
    let mut out = pairs(&[
        (
            "trained on",
            format!(
                "{} to {}: {} examples ({} model answers, {} desk labels)",
                r.trained_from.format("%Y-%m-%d %H:%M"),
                r.at.format("%Y-%m-%d %H:%M"),
                r.examples,
                r.from_results,
                r.from_feedback
            ),
        ),
        (
            "judged on",
            format!(
                "{} to {}",
                r.at.format("%Y-%m-%d %H:%M"),
                r.until.format("%Y-%m-%d %H:%M")
            ),
        ),
        (
            "cascade",
            format!("{} ({rule}) then {}", r.local, r.model_version),
        ),
        (
            "stored",
            r.stored
                .map_or("no".into(), |id| format!("time split {id}")),
        ),
    ]);
    out += &table(
        Some(vec![
            "truth",
            "tickets",
            "answered locally",
            "local precision",
            "cascade accuracy",
            "large model accuracy",
            "difference [95% CI]",
            "cost per ticket (cascade / large)",
            "per correct triage",
        ]),
        [
            Some(row("all", &r.all)),
            Some(row("the desk's label", &r.desk)),
            r.audit
                .as_ref()
                .map(|audit| row("the audit's answer (drawn at random)", audit)),
            Some(row(
                "the large model's own answer (grading itself)",
                &r.model,
            )),
        ]
        .into_iter()
        .flatten(),
        &[1, 2, 3, 4, 5],
    );
    out += &format!(
        "where the truth is the large model's own answer it is right by definition: that row says \
         how often the cascade agrees with it. McNemar p = {:.3} over every ticket.\n",
        r.paired.mcnemar_p
    );
    if let Some(t) = &r.thresholds {
        out += &thresholds(t);
    }
    out
}
