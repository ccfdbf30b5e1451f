//! Plain-text tables for people at a terminal; `--json` gives machines the same data.

use triage::report::{DeadLetterGroup, Health};

pub fn health(h: &Health) -> String {
    let mut rows = vec![
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
        ("dedup hits", h.dedup_hits.to_string()),
        ("duplicate tickets", h.duplicate_tickets.to_string()),
        ("billed calls", h.billed_calls.to_string()),
        ("possibly billed calls", h.possibly_billed_calls.to_string()),
        ("spend", format!("${:.4}", h.cost_usd)),
        ("saved by the key", format!("${:.4}", h.saved_usd)),
    ];
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
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

pub fn dead_letters(groups: &[DeadLetterGroup]) -> String {
    if groups.is_empty() {
        return "no dead letters\n".into();
    }
    let width = groups
        .iter()
        .map(|g| g.reason.len())
        .max()
        .unwrap_or(0)
        .max("reason".len());
    let mut out = format!("{:<width$}  {:>7}  newest\n", "reason", "count");
    for g in groups {
        out += &format!(
            "{:<width$}  {:>7}  {}\n",
            g.reason,
            g.count,
            g.newest.format("%Y-%m-%d %H:%M:%S UTC")
        );
    }
    out
}
