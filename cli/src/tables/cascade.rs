//! `triage train`, `triage models`, `triage models retire` and `triage models switch`: the local classifiers a cascade
//! names.

use std::collections::BTreeMap;

use triage::{
    operations::{models::Retirement, retrain::Retrained, train::Trained},
    pipeline::cascade::{models::StoredModel, switch::Switch},
    providers::classifier::target::Thresholds,
};

use super::{pairs, table};

pub(super) fn trained(t: &Trained) -> String {
    let sources = t
        .sources
        .iter()
        .map(|s| format!("{} ({})", s.source, s.examples))
        .collect::<Vec<_>>()
        .join(", ");
    let stored = if t.new {
        "stored"
    } else {
        "stored already (the same examples)"
    };
    let mb = |bytes: u64| format!("{:.1} MB", bytes as f64 / 1e6);
    let held = match t.budget {
        Some(budget) => format!(
            "{} of {} for examples, in the {} MB of {}",
            mb(t.held_bytes),
            mb(budget.bytes),
            budget.memory_mb,
            budget.of
        ),
        None => format!("{} (no memory budget known here)", mb(t.held_bytes)),
    };
    let mut rows = vec![
        ("version", t.version.clone()),
        ("examples", t.examples.to_string()),
        ("from", sources),
        ("held", held),
    ];
    // Every row a source did not train on, by why: never silently.
    let left_out: Vec<String> = t
        .sources
        .iter()
        .zip(&t.provenance)
        .filter(|(s, _)| s.left_out.total() > 0)
        .map(|(s, from)| {
            // Whom each cap bit, and by how much: a cap is no silent thinning either.
            let owner_cap = bitten("beyond their owner's cap", "owner", &from.from.owner_capped);
            let giver_cap = bitten(
                "beyond their giver's share",
                "giver",
                &from.from.giver_capped,
            );
            let why = [
                (
                    s.left_out.memory,
                    "beyond the memory's budget: older than those read",
                ),
                (
                    s.left_out.held,
                    "held: against both the model and the classifier, until a second source agrees",
                ),
                (s.left_out.owner_cap, owner_cap.as_str()),
                (s.left_out.giver_cap, giver_cap.as_str()),
                (s.left_out.row_cap, "beyond the rows' cap"),
            ]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, why)| format!("{n} {why}"))
            .collect::<Vec<_>>()
            .join(", ");
            format!("{}: {why}", s.source)
        })
        .collect();
    if !left_out.is_empty() {
        rows.push(("left out", left_out.join("; ")));
    }
    rows.extend([
        ("size", format!("{:.2} MB", t.bytes as f64 / 1e6)),
        ("took", format!("{:.1}s", t.seconds)),
        ("", stored.into()),
    ]);
    pairs(&rows) + &match &t.thresholds {
        Some(derived) => thresholds(derived) + &format!(
            "use it in a cascade: TRIAGE_MODEL='cascade({},p{},MODEL@EFFORT)': these thresholds, per department\n",
            t.version, derived.target
        ),
        None => format!(
            "use it in a cascade: TRIAGE_MODEL='cascade({},0.9,MODEL@EFFORT)'; choose the threshold with triage eval --thresholds, or train with --precision P\n",
            t.version
        ),
    }
}

/// `why`, naming each `party` a cap cut with the rows it left out of it.
fn bitten(why: &str, party: &str, cut: &BTreeMap<String, u64>) -> String {
    if cut.is_empty() {
        return why.to_string();
    }
    let named: Vec<String> = cut
        .iter()
        .map(|(k, n)| format!("{n} of {party} {k}"))
        .collect();
    format!("{why} ({})", named.join(", "))
}

/// The thresholds derived for a target, per department, and what they keep out of fold.
pub(super) fn thresholds(t: &Thresholds) -> String {
    let at = |t: Option<f64>| t.map_or("never local".to_string(), |t| format!("{t:.3}"));
    let precision = t.precision.map_or("–".into(), |p| format!("{p:.3}"));
    let mut out = format!(
        "target precision {}: cross-fitted over {} folds, {} examples answered out of fold; \
         {:.1}% would be answered locally, at precision {precision}\n",
        t.target,
        t.folds,
        t.rows,
        100.0 * t.coverage
    );
    let rows = t
        .departments
        .iter()
        .map(|(d, own)| [d.clone(), at(*own)])
        .chain(std::iter::once(["(every other)".to_string(), at(t.global)]));
    out += &table(Some(vec!["department", "threshold"]), rows, &[1]);
    out
}

pub(super) fn models(models: &[StoredModel]) -> String {
    if models.is_empty() {
        return "no local classifier yet: triage train --from set:evals/tickets.jsonl:dev\n".into();
    }
    table(
        Some(vec![
            "version", "trained", "examples", "from", "window", "targets", "erased", "size", "by",
        ]),
        models.iter().map(|m| {
            let from = m
                .sources
                .as_array()
                .map(|sources| {
                    sources
                        .iter()
                        .filter_map(|s| s["source"].as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let window = match (m.trained_from, m.trained_until) {
                (Some(from), Some(until)) => format!(
                    "{} to {}",
                    from.format("%Y-%m-%d %H:%M"),
                    until.format("%Y-%m-%d %H:%M")
                ),
                _ => "sets only".into(),
            };
            [
                m.version.clone(),
                m.created_at.format("%Y-%m-%d %H:%M").to_string(),
                m.examples.to_string(),
                from,
                window,
                m.targets
                    .iter()
                    .map(|t| format!("p{}", t.target))
                    .collect::<Vec<_>>()
                    .join(" "),
                m.erased_tickets.to_string(),
                format!("{:.2} MB", f64::from(m.bytes) / 1e6),
                m.trained_by.clone(),
            ]
        }),
        &[2, 6, 7],
    )
}

pub(super) fn retrained(r: &Retrained) -> String {
    let share = |s: f64| format!("{:.1}%", 100.0 * s);
    let precision = |p: Option<f64>| p.map_or("-".to_string(), |p| format!("{p:.3}"));
    pairs(&[
        ("switched", r.switched.to_string()),
        ("reason", r.reason.clone()),
        ("candidate", r.candidate.clone()),
        ("live", r.live.clone()),
        ("target precision", r.target_precision.to_string()),
        (
            "learnt from",
            format!(
                "{} to {}: {} examples",
                r.trained_from, r.judged_from, r.examples
            ),
        ),
        (
            "judged on",
            format!(
                "{} to {}: {} tickets",
                r.judged_from, r.judged_until, r.judged
            ),
        ),
        (
            "candidate",
            format!(
                "{} local, precision {}",
                share(r.candidate_local_share),
                precision(r.candidate_precision)
            ),
        ),
        (
            "live",
            format!(
                "{} local, precision {}",
                share(r.live_local_share),
                precision(r.live_precision)
            ),
        ),
        (
            "desk truth",
            if r.truth_capped.is_empty() {
                "each giver within its share".to_string()
            } else {
                bitten(
                    "beyond their giver's share, no truth",
                    "giver",
                    &r.truth_capped,
                )
            },
        ),
        ("runs in a row not switched", r.failing_runs.to_string()),
    ])
}

pub(super) fn switched(s: &Switch) -> String {
    pairs(&[
        ("switched to", s.local_version.clone()),
        (
            "replacing",
            s.previous
                .clone()
                .unwrap_or_else(|| "the configured cascade's own".to_string()),
        ),
        ("by", s.switched_by.clone()),
        ("reason", s.reason.clone()),
        (
            "new tickets",
            "keyed under it within 30 s in every process".to_string(),
        ),
    ])
}

pub(super) fn retired(r: &Retirement) -> String {
    let mut out = pairs(&[
        ("retired", r.retired.version.clone()),
        ("tickets it recorded", r.retired.tickets.to_string()),
        (
            "artefact removed",
            format!("{:.2} MB", f64::from(r.retired.bytes) / 1e6),
        ),
        ("queued jobs naming it", r.queued_jobs.to_string()),
    ]);
    if r.queued_jobs > 0 {
        out += "those jobs are dead-lettered unknown_local_model: reprocess them under another version\n";
    }
    out
}
