//! Live precision (docs/quality.md, "Live precision"): how often the configured cascade's
//! local answers are right, from its audit sample (`pipeline::cascade::audit`) over the last
//! `TRIAGE_AUDIT_WINDOW_DAYS`, with the exact (Clopper-Pearson) 95% interval. The truth is the
//! desk's label where an agent gave one, else the large model's answer on the audited ticket:
//! never the classifier's own answer, and never only the tickets the classifier was unsure of.
//!
//! [`check`] runs on the sweeper's tick: when the interval's upper bound falls below the
//! cascade's target, the cascade is suspended (`pipeline::cascade::suspension`). A resume
//! starts the window again at its time, so a forced resume is not undone by the audits that
//! caused the suspension.

use chrono::{DateTime, Duration, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;

use crate::{
    config::Config,
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::ModelVersion,
    },
    pipeline::cascade::{
        audit::{self, Audited},
        suspension::{self, Suspension},
        switch,
    },
    quality::metrics::exact::clopper_pearson,
    telemetry::metric,
};

/// What the figures are judged against, said in every report.
pub const TRUTH: &str = "audit: the large model on audited tickets, the desk's label where given";

/// `triage cascade status`: the configured cascade's live precision (SPEC's shape, and more).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Live {
    pub model_version: String,
    pub audited: u64,
    /// Of `audited`, right by the truth.
    pub correct: u64,
    /// `correct / audited`; `None` with nothing audited.
    pub precision: Option<f64>,
    /// The exact 95% interval, `[lo, hi]`.
    pub interval: [f64; 2],
    pub target: f64,
    /// Of the cascade's results in the window, the share its classifier answered (the
    /// status command's only: it counts results, which the sweeper's check does not need).
    pub local_share: Option<f64>,
    pub suspended: bool,
    pub reason: Option<String>,
    pub since: DateTime<Utc>,
    pub window_days: u32,
    pub audit_share: f64,
    pub truth: &'static str,
    /// Of `audited`, judged by a desk label rather than the audit's own answer.
    pub judged_by_desk: u64,
    /// By the department the classifier answered.
    pub by_department: Vec<Share>,
    /// By UTC day of the draw (`group` is the day), oldest first: the Quality page's line.
    pub by_day: Vec<Share>,
}

/// The audited answers of one group: how many, the share right, its exact interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Share {
    pub group: String,
    pub audited: u64,
    pub precision: f64,
    pub interval: [f64; 2],
}

/// `tally` folded by `group_of`, in the groups' order.
fn shares(tally: &[Audited], group_of: impl Fn(&Audited) -> String) -> Vec<Share> {
    let mut folded: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for row in tally {
        let (n, k) = folded.entry(group_of(row)).or_default();
        *n += row.n;
        *k += row.correct;
    }
    folded
        .into_iter()
        .map(|(group, (n, k))| {
            let interval = clopper_pearson(k, n);
            Share {
                group,
                audited: n,
                precision: k as f64 / n.max(1) as f64,
                interval: [interval.low, interval.high],
            }
        })
        .collect()
}

/// The configured cascade, as new tickets are keyed under it (the classifier switched to
/// last), or `None` when the configured model version is no cascade.
async fn configured(pool: &Pool, config: &Config) -> Result<Option<ModelVersion>> {
    let versions = switch::Live::default()
        .versions(pool, &config.versions)
        .await?;
    Ok(Some(versions.model.clone()).filter(|model| model.cascade().is_some()))
}

/// The live precision of `model_version` (a cascade) now.
async fn measure(
    client: &impl GenericClient,
    model_version: &ModelVersion,
    config: &Config,
    with_share: bool,
) -> Result<Live> {
    let cascade = model_version.cascade().expect("a cascade");
    let version = model_version.as_str();
    let window = Utc::now() - Duration::days(config.audit.window_days.into());
    let resumed = suspension::last_resumed(client, version).await?;
    let since = resumed.map_or(window, |resumed| resumed.max(window));
    let tally = audit::tally(client, version, since).await?;
    let (n, correct) = total(&tally);
    let interval = clopper_pearson(correct, n);
    let current = suspension::current(client, version).await?;
    let local_share = match with_share {
        true => audit::local_share(client, version, window).await?,
        false => None,
    };
    Ok(Live {
        model_version: version.to_string(),
        audited: n,
        correct,
        precision: (n > 0).then(|| correct as f64 / n as f64),
        interval: [interval.low, interval.high],
        target: cascade.threshold.implied_target(),
        local_share,
        suspended: current.is_some(),
        reason: current.map(|(reason, _)| reason),
        since,
        window_days: config.audit.window_days,
        audit_share: config.audit.share,
        truth: TRUTH,
        judged_by_desk: tally.iter().map(|d| d.by_desk).sum(),
        by_department: shares(&tally, |row| row.department.clone()),
        by_day: shares(&tally, |row| row.day.to_string()),
    })
}

fn total(tally: &[Audited]) -> (u64, u64) {
    tally
        .iter()
        .fold((0, 0), |(n, k), d| (n + d.n, k + d.correct))
}

/// Whether `live` calls for a suspension: the interval's upper bound below the target.
pub fn falls_short(live: &Live) -> bool {
    live.audited > 0 && live.interval[1] < live.target
}

/// `triage cascade status`: `None` when the configured model version is no cascade.
pub async fn status(pool: &Pool, config: &Config) -> Result<Option<Live>> {
    let Some(model) = configured(pool, config).await? else {
        return Ok(None);
    };
    let client = db::client(pool).await?;
    Ok(Some(measure(&client, &model, config, true).await?))
}

/// The sweeper's tick: measures the configured cascade, suspends it when its bound falls
/// below its target (the reason says by how much, on how many), and reports the figures as
/// metrics.
pub async fn check(pool: &Pool, config: &Config) -> Result<Option<Live>> {
    let Some(model) = configured(pool, config).await? else {
        return Ok(None);
    };
    let client = db::client(pool).await?;
    let mut live = measure(&client, &model, config, false).await?;
    if !live.suspended && falls_short(&live) {
        let reason = format!(
            "audited precision {:.3} over {} answers: its 95% upper bound {:.3} is below the \
             target {}",
            live.precision.unwrap_or(0.0),
            live.audited,
            live.interval[1],
            live.target
        );
        let suspension = Suspension {
            model_version: live.model_version.clone(),
            reason: reason.clone(),
            audited: live.audited,
            correct: live.correct,
            upper_bound: live.interval[1],
            target: live.target,
        };
        if suspension::suspend(&client, &suspension).await? {
            tracing::warn!(model_version = %live.model_version, %reason, "cascade suspended");
        }
        live.suspended = true;
        live.reason = Some(reason);
    }
    metric::cascade_live(
        live.audited,
        live.interval[0],
        live.interval[1],
        live.suspended,
    );
    Ok(Some(live))
}

/// What `triage cascade resume` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resumed {
    pub model_version: String,
    /// Why it had been suspended.
    pub suspended_for: String,
    pub forced: bool,
    /// The figures it was resumed on.
    pub live: Live,
}

/// Ends the configured cascade's suspension: refused while the audited bound is still below
/// the target, unless `force`; the window starts again now.
pub async fn resume(
    pool: &Pool,
    config: &Config,
    (by, reason): (&str, &str),
    force: bool,
) -> Result<Resumed> {
    if reason.trim().is_empty() {
        return Err(InvalidRequest::new("reason", "a resume needs --reason TEXT".into()).into());
    }
    let Some(model) = configured(pool, config).await? else {
        return Err(InvalidRequest::new(
            "model_version",
            "the configured model version (TRIAGE_MODEL) is no cascade".into(),
        )
        .into());
    };
    let client = db::client(pool).await?;
    let live = measure(&client, &model, config, false).await?;
    if !live.suspended {
        return Err(InvalidRequest::new(
            "model_version",
            format!("{} is not suspended", live.model_version),
        )
        .into());
    }
    if falls_short(&live) && !force {
        return Err(InvalidRequest::new(
            "force",
            format!(
                "the audited precision's upper bound {:.3} is still below the target {}: \
                 retrain, or resume with --force",
                live.interval[1], live.target
            ),
        )
        .into());
    }
    let version = live.model_version.as_str();
    let Some(suspended_for) = suspension::resume(&client, version, (by, reason), force).await?
    else {
        return Err(
            InvalidRequest::new("model_version", format!("{version} is not suspended")).into(),
        );
    };
    let live = measure(&client, &model, config, false).await?;
    Ok(Resumed {
        model_version: live.model_version.clone(),
        suspended_for,
        forced: force,
        live,
    })
}
