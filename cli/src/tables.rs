//! Plain-text tables for people at a terminal; `--json` gives machines the same data.

use std::fmt::Write;

use comfy_table::{presets::NOTHING, CellAlignment, Table};
use triage::{
    operations::{
        audit::AuditEntry,
        eval::{self, store::StoredRun},
        promote::Promotion,
        redrive, reprocess,
        shadow::ShadowDiff,
        Outcome,
    },
    pipeline::{
        delivery::report::DeliveriesReport,
        erase::Erased,
        reads::report::{DeadLetterGroup, Health},
    },
};

pub fn outcome(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Reprocess(report) => reprocess(report),
        Outcome::ShadowDiff(diff) => shadow_diff(diff),
        Outcome::Promote(promotion) => promote(promotion),
        Outcome::Redrive(report) => redrive(report),
        Outcome::Stats(h) => health(h),
        Outcome::DeadLetters(groups) => dead_letters(groups),
        Outcome::Erase(erased) => erase(erased),
        Outcome::Audit(entries) => audit(entries),
        Outcome::Eval(report) => eval_report(report),
        Outcome::EvalRuns(listing) => eval_running(&listing.running) + &eval_runs(&listing.runs),
        Outcome::Deliveries(report) => deliveries(report),
        Outcome::ReplayDeliveries { queued } => format!("{queued} deliveries queued again\n"),
        Outcome::Feedback { given, not_found } => format!(
            "{} stored ({} replacing earlier feedback); {} not found{}\n",
            given.len(),
            given.iter().filter(|g| g.replaced).count(),
            not_found.len(),
            not_found
                .iter()
                .map(|id| format!("\n  {id}"))
                .collect::<String>()
        ),
        Outcome::Paused { paused } if paused.is_empty() => "nothing is paused\n".into(),
        Outcome::Paused { paused } => table(
            Some(vec!["paused lane", "since", "by", "reason"]),
            paused.iter().map(|p| {
                [
                    p.lane.clone(),
                    p.paused_at.to_rfc3339(),
                    p.paused_by.clone(),
                    p.reason.clone().unwrap_or_default(),
                ]
            }),
            &[],
        ),
    }
}

/// Columns aligned with spaces, no borders: output people read and `grep` alike. Columns
/// after the first are right-aligned when `numbers` says so.
fn table<R: IntoIterator<Item = String>>(
    header: Option<Vec<&str>>,
    rows: impl IntoIterator<Item = R>,
    numbers: &[usize],
) -> String {
    let mut table = Table::new();
    table.load_style(NOTHING);
    if let Some(header) = header {
        table.set_header(header);
    }
    for row in rows {
        table.add_row(row.into_iter().collect::<Vec<_>>());
    }
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        if numbers.contains(&i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    // comfy-table pads every line to the full width; trailing blanks help nobody.
    let mut out: String = table
        .lines()
        .map(|line| line.trim_end().to_string() + "\n")
        .collect();
    if out.is_empty() {
        out.push('\n');
    }
    out
}

/// `key  value` lines, keys aligned.
fn pairs(rows: &[(&str, String)]) -> String {
    table(
        None,
        rows.iter().map(|(k, v)| [k.to_string(), v.clone()]),
        &[],
    )
}

pub fn health(h: &Health) -> String {
    let mut rows = vec![
        (
            "paused by an operator",
            match h.paused.is_empty() {
                true => "nothing".into(),
                false => h.paused.join(", "),
            },
        ),
        (
            "pending (claimable + delayed)",
            format!("{} ({} delayed)", h.pending, h.delayed),
        ),
        (
            "processing (live leases)",
            format!("{} ({})", h.processing, h.live_leases),
        ),
        ("done", h.done.to_string()),
        ("dead", h.dead.to_string()),
        (
            "oldest claimable age",
            format!("{:.1} s", h.oldest_pending_age_seconds),
        ),
        (
            "unserved (no worker here claims them)",
            h.unserved_pending.to_string(),
        ),
        ("dedup hits", h.dedup_hits.to_string()),
        ("duplicate tickets", h.duplicate_tickets.to_string()),
        ("billed calls", h.billed_calls.to_string()),
        ("possibly billed calls", h.possibly_billed_calls.to_string()),
        ("spend", format!("${:.4}", h.cost_usd)),
        ("saved by the key", format!("${:.4}", h.saved_usd)),
        (
            "cost per evaluated ticket",
            h.cost_per_ticket_usd
                .map_or("none yet".into(), |usd| format!("${usd:.6}")),
        ),
        (
            "this month at the last 24 h's rate",
            format!("${:.2}", h.month_projection_usd),
        ),
        (
            "spent today (UTC) / daily budget",
            match h.daily_budget_usd {
                Some(budget) => format!("${:.4} / ${budget:.2}", h.spent_today_usd),
                None => format!("${:.4} / none", h.spent_today_usd),
            },
        ),
    ];
    for g in &h.cost_per_task {
        rows.push((
            "cost per ticket",
            format!(
                "{} {} {}: {} calls, {} evaluated, {}",
                g.prompt_version,
                g.lane,
                g.tier,
                g.calls,
                g.evaluated,
                g.cost_per_ticket_usd
                    .map_or("-".into(), |usd| format!("${usd:.6}"))
            ),
        ));
    }
    for a in &h.agreement {
        let share = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
        rows.push((
            "agreement with the desk",
            format!(
                "{} days, {}/{}: n {}, department {:.3}, urgent precision {}, recall {}",
                a.window_days,
                a.prompt_version,
                a.model_version,
                a.n,
                a.department_accuracy,
                share(a.urgent_precision),
                share(a.urgent_recall)
            ),
        ));
    }
    for b in &h.breakers {
        let until = b
            .open_until
            .map(|t| format!(" until {t}"))
            .unwrap_or_default();
        rows.push((
            "breaker",
            format!(
                "{}: {}{until} ({} failures)",
                b.provider, b.state, b.consecutive_failures
            ),
        ));
    }
    pairs(&rows)
}

pub fn dead_letters(groups: &[DeadLetterGroup]) -> String {
    if groups.is_empty() {
        return "no dead letters\n".into();
    }
    let rows = groups.iter().map(|g| {
        [
            g.reason.clone(),
            g.count.to_string(),
            g.newest.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        ]
    });
    table(Some(vec!["reason", "count", "newest"]), rows, &[1])
}

fn dry_run_note(dry_run: bool) -> &'static str {
    if dry_run {
        " (dry run: nothing written)"
    } else {
        ""
    }
}

fn reprocess(r: &reprocess::Report) -> String {
    format!(
        "reprocess under {} of tickets since {}{}\n",
        r.versions,
        r.since.format("%Y-%m-%d %H:%M:%S UTC"),
        dry_run_note(r.dry_run)
    ) + &pairs(&[
        ("tickets", r.tickets.to_string()),
        ("batches", r.batches.to_string()),
        ("inserted (new jobs)", r.inserted.to_string()),
        ("already queued or evaluated", r.already_queued.to_string()),
        ("ticket links added", r.links_added.to_string()),
    ])
}

fn redrive(r: &redrive::Report) -> String {
    let verb = if r.dry_run { "would move" } else { "moved" };
    let mut out = format!(
        "{verb} {} dead letters back to the queue{}\n",
        r.moved,
        dry_run_note(r.dry_run)
    );
    let rows: Vec<_> = r
        .by_reason
        .iter()
        .map(|(reason, n)| (reason.as_str(), n.to_string()))
        .collect();
    out += &pairs(&rows);
    out
}

fn promote(p: &Promotion) -> String {
    let undo = match &p.previous {
        Some(previous) => format!(
            "previously {previous}; to undo: triage promote --prompt-version {} --model-version {}",
            previous.prompt_version, previous.model_version
        ),
        None => "previously the API's configured version; to undo, promote that one".into(),
    };
    let gate = p
        .gate
        .as_ref()
        .map(|note| format!("quality gate: {note}\n"))
        .unwrap_or_default();
    format!(
        "{gate}GET /tickets/{{id}} now shows {} (promoted {})\n{undo}\n",
        p.version,
        p.promoted_at.format("%Y-%m-%d %H:%M:%S UTC"),
    )
}

fn shadow_diff(d: &ShadowDiff) -> String {
    let mut out = format!(
        "{} → {}: {} tickets evaluated under both\n",
        d.from, d.to, d.compared
    );
    let Some(agreement) = d.department_agreement else {
        return out;
    };
    let _ = writeln!(out, "department agreement: {:.1}%\n", agreement * 100.0);

    // Confusion table: rows are the `from` departments, columns the `to` ones.
    let mut departments: Vec<&str> = d
        .confusion
        .iter()
        .flat_map(|c| [c.from.as_str(), c.to.as_str()])
        .collect();
    departments.sort_unstable();
    departments.dedup();
    let header = std::iter::once("from \\ to").chain(departments.iter().copied());
    let rows = departments.iter().map(|from| {
        std::iter::once(from.to_string()).chain(departments.iter().map(|to| {
            d.confusion
                .iter()
                .find(|c| c.from == *from && c.to == *to)
                .map_or(0, |c| c.count)
                .to_string()
        }))
    });
    let numbers: Vec<usize> = (1..=departments.len()).collect();
    out += &table(Some(header.collect()), rows, &numbers);

    let u = &d.urgency_diff;
    let stat = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:+.3}"));
    let _ = writeln!(
        out,
        "\nurgency_score difference (to - from): min {}  p10 {}  p50 {}  p90 {}  max {}  mean {}",
        stat(u.min),
        stat(u.p10),
        stat(u.p50),
        stat(u.p90),
        stat(u.max),
        stat(u.mean)
    );
    let most = u
        .histogram
        .iter()
        .map(|b| b.count)
        .max()
        .unwrap_or(0)
        .max(1);
    let histogram = u.histogram.iter().map(|b| {
        let range = match (b.lower, b.upper) {
            (None, Some(upper)) => format!("< {upper:+.2}"),
            (Some(lower), None) => format!(">= {lower:+.2}"),
            (Some(lower), Some(upper)) => format!("{lower:+.2} .. {upper:+.2}"),
            (None, None) => "any".into(),
        };
        // Rounded up, so a bucket with any ticket shows.
        let bar = "#".repeat(((b.count * 40 + most - 1) / most) as usize);
        [range, b.count.to_string(), bar]
    });
    out += &table(None, histogram, &[0, 1]);

    if !d.largest_disagreements.is_empty() {
        let _ = writeln!(out, "\nlargest disagreements:");
        for g in &d.largest_disagreements {
            let _ = writeln!(
                out,
                "  {}  {} → {}  urgency {:.2} → {:.2} ({:+.2})",
                g.ticket_id,
                g.from_department,
                g.to_department,
                g.from_urgency_score,
                g.to_urgency_score,
                g.urgency_diff
            );
        }
    }
    out
}

fn erase(e: &Erased) -> String {
    let mut rows = vec![
        ("tickets erased", e.tickets.to_string()),
        ("request keys forgotten", e.request_keys.to_string()),
        (
            "results, jobs, ledger rows erased",
            format!("{}, {}, {}", e.results, e.jobs, e.ledger_rows),
        ),
        (
            "kept for other tickets",
            e.kept_for_other_tickets.to_string(),
        ),
    ];
    for id in &e.not_found {
        rows.push(("not found", id.to_string()));
    }
    pairs(&rows)
}

fn audit(entries: &[AuditEntry]) -> String {
    table(
        Some(vec!["at", "who", "db login", "op", "status", "parameters"]),
        entries.iter().map(|e| {
            [
                e.at.format("%Y-%m-%d %H:%M:%S").to_string(),
                e.principal.clone(),
                e.db_login.clone(),
                e.op.clone(),
                e.status.clone(),
                e.parameters.to_string(),
            ]
        }),
        &[],
    )
}

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

fn optional(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// promptfoo's layout: one column per version, the figures side by side, then each
/// version's classes and confusion, then the paired tests.
fn eval_report(r: &eval::Report) -> String {
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
    let figures: [(&str, Figure); 18] = [
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

fn eval_running(running: &[eval::Running]) -> String {
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

fn eval_runs(runs: &[StoredRun]) -> String {
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
            "calls",
            "cost",
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
                r.calls.to_string(),
                format!("${:.4}", r.cost_usd),
                r.operator.clone(),
            ]
        }),
        &[0, 5, 6, 7, 8, 9, 10, 11],
    )
}

fn deliveries(report: &DeliveriesReport) -> String {
    let lag = report
        .oldest_undelivered_age_seconds
        .map_or("none".to_string(), |s| format!("{s:.1}s"));
    let rows = report.endpoints.iter().map(|e| {
        vec![
            e.subscription_id.to_string(),
            e.kind.clone(),
            e.target.clone(),
            e.status.to_string(),
            e.pending.to_string(),
            e.processing.to_string(),
            e.delivered.to_string(),
            e.dead.to_string(),
            e.why().unwrap_or_default().to_string(),
        ]
    });
    format!("oldest undelivered: {lag}\n")
        + &table(
            Some(vec![
                "subscription",
                "kind",
                "target",
                "status",
                "pending",
                "processing",
                "delivered",
                "dead",
                "last error",
            ]),
            rows,
            &[4, 5, 6, 7],
        )
}
