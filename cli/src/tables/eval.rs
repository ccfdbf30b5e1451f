//! `triage eval`'s report and its stored runs: promptfoo's layout, one column per version.

use std::{collections::BTreeMap, fmt::Write};

use triage::quality::{self as eval, metrics::confusions, runs::StoredRun};

use super::table;

fn ci(figure: f64, interval: &eval::metrics::Interval) -> String {
    format!("{figure:.3} [{:.3}, {:.3}]", interval.low, interval.high)
}

/// Department accuracy with its interval over families (`accuracy_ci`), or, for a run stored
/// before it, the Wilson interval over rows.
fn accuracy(f: &eval::RunFigures) -> String {
    let d = &f.department;
    match d.accuracy_ci {
        Some([low, high]) => ci(d.accuracy, &eval::metrics::Interval { low, high }),
        None => ci(d.accuracy, &d.accuracy_ci95) + " (rows)",
    }
}

/// The cost of one correct triage: "-" when no row was right.
fn per_correct(usd: Option<f64>) -> String {
    usd.map_or("-".into(), |usd| format!("${usd:.6}"))
}

fn optional(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// promptfoo's layout: one column per version, the figures side by side, then each
/// version's classes and confusion, then the paired tests.
pub(super) fn report(r: &eval::Report) -> String {
    let split = r
        .set
        .split
        .map_or("all rows".into(), |s| format!("split {s}"));
    let mut out = format!(
        "run {}, set {} {} ({}, {} rows){}\n\n",
        r.run_id,
        r.set.source,
        &r.set.digest[..12.min(r.set.digest.len())],
        split,
        r.set.rows,
        if r.complete {
            ""
        } else {
            " — INCOMPLETE: missing answers count as wrong; stored once the workers have answered \
             (triage eval --list shows it)"
        }
    );
    // The offline baseline (rules@offline, answered in-process) is a column like the others.
    let columns: Vec<&eval::RunFigures> = r.runs.iter().chain(&r.baseline).collect();
    type Figure = fn(&eval::RunFigures) -> String;
    let figures: [(&str, Figure); 20] = [
        ("answered / rows", |f| format!("{} / {}", f.answered, f.n)),
        ("families", |f| f.families.to_string()),
        ("department accuracy [95% CI]", accuracy),
        ("urgent recall [95% CI]", |f| match &f.urgent.recall_ci95 {
            Some(interval) => ci(f.urgent.recall, interval),
            None => format!("{:.3}", f.urgent.recall),
        }),
        ("department macro-F1 [95% CI]", |f| {
            ci(f.department.macro_f1, &f.department.macro_f1_ci95)
        }),
        ("urgent precision", |f| format!("{:.3}", f.urgent.precision)),
        ("urgent F1", |f| format!("{:.3}", f.urgent.f1)),
        ("urgent Brier score", |f| format!("{:.4}", f.urgent.brier)),
        ("urgent ROC AUC", |f| optional(f.urgent.auc, 3)),
        ("contract violations", |f| f.contract_violations.to_string()),
        ("dead letters", |f| f.dead_letters.to_string()),
        ("calls made by this run", |f| f.calls.to_string()),
        ("tokens in / out", |f| {
            format!("{} / {}", f.input_tokens, f.output_tokens)
        }),
        ("cost of this run", |f| format!("${:.4}", f.cost_usd)),
        ("cost per ticket (answers)", |f| {
            format!("${:.6}", f.cost_per_ticket_usd)
        }),
        ("cost per correct triage", |f| {
            per_correct(f.cost_per_correct_usd)
        }),
        ("answered locally (cascade)", |f| {
            format!("{:.3}", f.local_share)
        }),
        ("p50 time per evaluation", |f| {
            optional(f.latency_p50_ms, 0) + " ms"
        }),
        ("p95 time per evaluation", |f| {
            optional(f.latency_p95_ms, 0) + " ms"
        }),
        ("urgent threshold (policy)", |f| {
            format!("{}", f.urgent.threshold)
        }),
    ];
    let header = std::iter::once("")
        .chain(columns.iter().map(|f| f.version.as_str()))
        .collect();
    let rows = figures.iter().map(|(name, figure)| {
        std::iter::once(name.to_string()).chain(columns.iter().map(|f| figure(f)))
    });
    let numbers: Vec<usize> = (1..=columns.len()).collect();
    out += &table(Some(header), rows, &numbers);

    let mut classes: Vec<&str> = columns
        .iter()
        .flat_map(|f| f.department.per_class.keys().map(String::as_str))
        .collect();
    classes.sort_unstable();
    classes.dedup();
    let _ = writeln!(out, "\nper department: precision / recall / F1 (support)");
    let header = std::iter::once("department")
        .chain(columns.iter().map(|f| f.version.as_str()))
        .collect();
    let rows = classes.iter().map(|class| {
        std::iter::once(class.to_string()).chain(columns.iter().map(|f| {
            f.department.per_class.get(*class).map_or("-".into(), |c| {
                format!(
                    "{:.2} / {:.2} / {:.2} ({})",
                    c.precision, c.recall, c.f1, c.support
                )
            })
        }))
    });
    out += &table(Some(header), rows, &numbers);

    for f in &r.runs {
        let confusion = &f.department.confusion;
        if confusion.len() > confusions::GRID_CLASSES {
            out += &top_confusions(&f.version, confusion);
            continue;
        }
        let _ = writeln!(
            out,
            "\nconfusion of {} (rows: label, columns: answer)",
            f.version
        );
        let mut answers: Vec<&str> = f
            .department
            .confusion
            .values()
            .flat_map(|row| row.keys().map(String::as_str))
            .chain(f.department.confusion.keys().map(String::as_str))
            .collect();
        answers.sort_unstable();
        answers.dedup();
        let header = std::iter::once("label \\ answer")
            .chain(answers.iter().copied())
            .collect();
        let rows = f.department.confusion.iter().map(|(label, row)| {
            std::iter::once(label.clone()).chain(
                answers
                    .iter()
                    .map(|a| row.get(*a).copied().unwrap_or(0).to_string()),
            )
        });
        let numbers: Vec<usize> = (1..=answers.len()).collect();
        out += &table(Some(header), rows, &numbers);
    }

    for c in &r.comparison {
        let p = &c.paired;
        let _ = writeln!(
            out,
            "\n{} vs {}: macro-F1 {:+.3} [{:+.3}, {:+.3}] (paired bootstrap p = {:.3}); \
             McNemar: {} right only under {}, {} only under {}, p = {:.3} → {}",
            c.other,
            c.baseline,
            p.macro_f1_diff,
            p.macro_f1_diff_ci95.low,
            p.macro_f1_diff_ci95.high,
            p.bootstrap_p,
            p.only_other_right,
            c.other,
            p.only_baseline_right,
            c.baseline,
            p.mcnemar_p,
            if p.significant {
                "significant"
            } else {
                "not significant"
            }
        );
    }
    out
}

pub(super) fn running(running: &[eval::Running]) -> String {
    if running.is_empty() {
        return String::new();
    }
    let mut out = table(
        Some(vec![
            "run under way",
            "since",
            "set",
            "split",
            "versions",
            "answered",
            "dead",
            "of",
        ]),
        running.iter().map(|r| {
            [
                r.run_id.to_string(),
                r.started_at.format("%Y-%m-%d %H:%M").to_string(),
                r.set_source.clone(),
                r.split.map_or("all".into(), |s| s.to_string()),
                r.versions.join(" "),
                r.progress.answered.to_string(),
                r.progress.dead.to_string(),
                r.progress.total.to_string(),
            ]
        }),
        &[5, 6, 7],
    );
    out.push('\n');
    out
}

pub(super) fn runs(runs: &[StoredRun]) -> String {
    if runs.is_empty() {
        return "no eval runs yet: triage eval --set evals/tickets.jsonl --split test\n".into();
    }
    table(
        Some(vec![
            "id",
            "finished",
            "set",
            "split",
            "version",
            "n",
            "families",
            "accuracy [95% CI]",
            "macro-F1",
            "urgent recall",
            "local",
            "calls",
            "cost",
            "cost/ticket",
            "cost/correct",
            "who",
        ]),
        runs.iter().map(|r| {
            [
                r.id.to_string(),
                r.finished_at.format("%Y-%m-%d %H:%M").to_string(),
                r.set_digest[..12.min(r.set_digest.len())].to_string(),
                r.split.clone().unwrap_or_else(|| "all".into()),
                r.version.to_string(),
                r.n.to_string(),
                match r.figures.families {
                    0 => "-".into(),
                    families => families.to_string(),
                },
                accuracy(&r.figures),
                format!("{:.3}", r.figures.department.macro_f1),
                format!("{:.3}", r.figures.urgent.recall),
                format!("{:.3}", r.figures.local_share),
                r.calls.to_string(),
                format!("${:.4}", r.cost_usd),
                format!("${:.6}", r.figures.cost_per_ticket_usd),
                per_correct(r.figures.cost_per_correct_usd),
                r.operator.clone(),
            ]
        }),
        &[0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
    )
}

/// `triage eval --thresholds`: one line per threshold, the large model alone above them.
pub(super) fn sweep(s: &eval::thresholds::Sweep) -> String {
    let interval =
        |ci: Option<[f64; 2]>| ci.map_or(String::new(), |[l, h]| format!(" [{l:.3}, {h:.3}]"));
    let mut out = format!(
        "run {}, set {} {} (split dev, {} rows): {} with {}\n",
        s.run_id,
        s.set.source,
        &s.set.digest[..12.min(s.set.digest.len())],
        s.set.rows,
        s.version,
        s.local,
    );
    let large = &s.large;
    let _ = writeln!(
        out,
        "the large model alone, {}: accuracy {:.3}{}, cost per ticket ${:.6}, per correct {} \
         ({} calls by this run, ${:.4})\n",
        large.version,
        large.department_accuracy,
        interval(large.department_accuracy_ci),
        large.cost_per_ticket_usd,
        per_correct(large.cost_per_correct_usd),
        large.calls,
        large.cost_usd,
    );
    if s.learnt_these_rows {
        let _ = writeln!(
            out,
            "!! {} was trained on this set's dev split: these are its own examples, so it is surer \
             and righter here than on tickets it never saw, and the sweep flatters it. Choose on rows \
             it did not learn (docs/quality.md, \"The cascade\").\n",
            s.local
        );
    }
    if !s.complete {
        let p = &s.progress;
        let _ = writeln!(
            out,
            "INCOMPLETE: {} of {} answers in ({} dead); the same command again continues the run \
             and sweeps once every answer is in",
            p.answered, p.total, p.dead
        );
        return out;
    }
    out += &table(
        Some(vec![
            "threshold",
            "answered locally",
            "department accuracy [95% CI]",
            "vs large",
            "urgent recall",
            "cost per ticket",
            "cost per correct",
            "",
        ]),
        s.points.iter().map(|p| {
            [
                format!("{:.2}", p.threshold),
                format!("{:.3}", p.local_share),
                format!("{:.3}", p.department_accuracy) + &interval(p.department_accuracy_ci),
                format!("{:+.3}", p.department_accuracy - large.department_accuracy),
                format!("{:.3}", p.urgent_recall),
                format!("${:.6}", p.cost_per_ticket_usd),
                per_correct(p.cost_per_correct_usd),
                if p.named {
                    "<- the cascade's".into()
                } else {
                    String::new()
                },
            ]
        }),
        &[0, 1, 3, 4, 5, 6],
    );
    if let Some(id) = s.stored {
        let _ = writeln!(
            out,
            "\nstored as sweep {id} (the console's Quality page draws it). A row: at this threshold \
             the classifier answers the share shown, the large model the rest. Pick the lowest \
             threshold whose accuracy you accept, then evaluate that cascade on --split test."
        );
    }
    out
}

/// Past [`confusions::GRID_CLASSES`] departments, the most frequent errors instead of a grid.
fn top_confusions(version: &str, confusion: &BTreeMap<String, BTreeMap<String, u64>>) -> String {
    let ranked = confusions::ranked(confusion);
    let shown = ranked.len().min(confusions::TOP_CONFUSIONS);
    let mut out = format!(
        "\nconfusions of {version}: the {shown} most frequent of {} ({} departments, no grid)\n",
        ranked.len(),
        confusion.len()
    );
    let rows = ranked.iter().take(shown).map(|c| {
        [
            c.label.to_string(),
            c.answer.to_string(),
            c.rows.to_string(),
            format!("{:.0}%", 100.0 * c.rows as f64 / c.label_rows as f64),
        ]
    });
    out += &table(
        Some(vec!["label", "answered", "rows", "of the label's"]),
        rows,
        &[2, 3],
    );
    out
}
