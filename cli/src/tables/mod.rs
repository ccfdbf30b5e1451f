//! Plain-text tables for people at a terminal; `--json` gives machines the same data.
//! [`eval`] has the eval reports', [`cascade`] the local classifiers', [`taxonomy`] the
//! desk's taxonomies'.

mod by_time;
mod cascade;
mod eval;
mod live;
mod taxonomy;

use std::fmt::Write;

use comfy_table::{presets::NOTHING, CellAlignment, Table};
use triage::{
    operations::{
        audit::AuditEntry, promote::Promotion, redrive, reprocess, shadow::ShadowDiff, Outcome,
    },
    pipeline::{
        delivery::status::DeliveriesReport,
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
        Outcome::Eval(report) => eval::report(report),
        Outcome::Sweep(sweep) => eval::sweep(sweep),
        Outcome::ByTime(report) => by_time::report(report),
        Outcome::EvalRuns(listing) => eval::running(&listing.running) + &eval::runs(&listing.runs),
        Outcome::Trained(trained) => cascade::trained(trained),
        Outcome::Models(models) => cascade::models(models),
        Outcome::Retired(retirement) => cascade::retired(retirement),
        Outcome::Switched(switch) => cascade::switched(switch),
        Outcome::Retrained(run) => cascade::retrained(run),
        Outcome::Cascade(status) => live::status(status),
        Outcome::CascadeResumed(resumed) => live::resumed(resumed),
        Outcome::TaxonomyAdded(added) => taxonomy::added(added),
        Outcome::Taxonomies(listed) => taxonomy::listed(listed),
        Outcome::Taxonomy(shown) => taxonomy::shown(shown),
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
pub(super) fn table<R: IntoIterator<Item = String>>(
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
pub(super) fn pairs(rows: &[(&str, String)]) -> String {
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
    // Undone as it was done: Zendesk's tickets are restored only by a write-back too.
    let (written, again) = match p.write_back {
        true => (
            "its results are written back to the desk's open Zendesk tickets\n",
            " --write-back",
        ),
        false => ("", ""),
    };
    let undo = match &p.previous {
        Some(previous) => format!(
            "previously {previous}; to undo: triage promote --prompt-version {} --model-version {}{again}",
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
        "{gate}GET /tickets/{{id}} now shows {} (promoted {})\n{written}{undo}\n",
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
