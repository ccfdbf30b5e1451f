//! `triage taxonomy add|list|show`: the desk's taxonomies.

use triage::{
    operations::taxonomy::Shown,
    pipeline::taxonomy::{Added, Listed},
};

use super::{pairs, table};

pub(super) fn added(added: &Added) -> String {
    let stored = if added.new {
        "stored"
    } else {
        "stored already (the same content)"
    };
    pairs(&[
        ("version", added.policy_version.clone()),
        ("departments", added.departments.to_string()),
        ("", stored.into()),
    ])
}

pub(super) fn listed(listed: &[Listed]) -> String {
    if listed.is_empty() {
        return "no taxonomy stored yet: triage taxonomy add FILE (docs/taxonomy.md)\n".into();
    }
    table(
        Some(vec!["version", "name", "departments", "added"]),
        listed.iter().map(|t| {
            [
                t.policy_version.clone(),
                t.name.clone(),
                t.departments.to_string(),
                t.added_at.format("%Y-%m-%d %H:%M").to_string(),
            ]
        }),
        &[2],
    )
}

pub(super) fn shown(shown: &Shown) -> String {
    let t = &shown.taxonomy;
    pairs(&[
        ("version", shown.policy_version.clone()),
        ("urgent", t.urgent.clone()),
        ("urgent at", t.urgent_threshold.to_string()),
    ]) + &table(
        Some(vec!["department", "zendesk group", "definition"]),
        t.departments.iter().map(|d| {
            [
                d.name.clone(),
                d.zendesk_group_id
                    .map(|g| g.to_string())
                    .unwrap_or_default(),
                d.description.clone(),
            ]
        }),
        &[1],
    )
}
