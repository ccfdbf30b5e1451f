//! `triage train` and `triage models`: the local classifiers a cascade names.

use triage::{operations::train::Trained, pipeline::cascade::models::StoredModel};

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
    pairs(&[
        ("version", t.version.clone()),
        ("examples", t.examples.to_string()),
        ("from", sources),
        ("size", format!("{:.2} MB", t.bytes as f64 / 1e6)),
        ("took", format!("{:.1}s", t.seconds)),
        ("", stored.into()),
    ]) + &format!(
        "use it in a cascade: TRIAGE_MODEL='cascade({},0.9,MODEL@EFFORT)'; choose the threshold with triage eval --thresholds\n",
        t.version
    )
}

pub(super) fn models(models: &[StoredModel]) -> String {
    if models.is_empty() {
        return "no local classifier yet: triage train --from set:evals/tickets.jsonl:dev\n".into();
    }
    table(
        Some(vec!["version", "trained", "examples", "from", "size", "by"]),
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
            [
                m.version.clone(),
                m.created_at.format("%Y-%m-%d %H:%M").to_string(),
                m.examples.to_string(),
                from,
                format!("{:.2} MB", f64::from(m.bytes) / 1e6),
                m.trained_by.clone(),
            ]
        }),
        &[2, 4],
    )
}
