//! `triage cascade status` and `triage cascade resume`: the configured cascade's audited
//! live precision.

use triage::quality::live::{Live, Resumed};

use super::{pairs, table};

pub(super) fn status(live: &Live) -> String {
    let share = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{:.1}%", s * 100.0));
    let interval = |i: [f64; 2]| format!("[{:.3}, {:.3}]", i[0], i[1]);
    let state = match (&live.suspended, &live.reason) {
        (true, Some(reason)) => format!("SUSPENDED: {reason}"),
        (true, None) => "SUSPENDED".to_string(),
        (false, _) => "answering".to_string(),
    };
    let mut out = pairs(&[
        ("cascade", live.model_version.clone()),
        ("state", state),
        (
            "audited",
            format!(
                "{} since {} ({} judged by the desk)",
                live.audited,
                live.since.format("%Y-%m-%d %H:%M UTC"),
                live.judged_by_desk
            ),
        ),
        ("precision", share(live.precision)),
        ("95% exact interval", interval(live.interval)),
        ("target", live.target.to_string()),
        ("local share", share(live.local_share)),
        ("audit share", format!("{}", live.audit_share)),
        ("truth", live.truth.to_string()),
    ]);
    if !live.by_department.is_empty() {
        out.push('\n');
        out += &table(
            Some(vec!["department", "audited", "precision", "95% interval"]),
            live.by_department.iter().map(|d| {
                [
                    d.group.clone(),
                    d.audited.to_string(),
                    format!("{:.3}", d.precision),
                    interval(d.interval),
                ]
            }),
            &[1, 2],
        );
    }
    out
}

pub(super) fn resumed(r: &Resumed) -> String {
    let forced = if r.forced { " (forced)" } else { "" };
    format!(
        "{} resumed{forced}; it had been suspended: {}\n{}",
        r.model_version,
        r.suspended_for,
        status(&r.live)
    )
}
