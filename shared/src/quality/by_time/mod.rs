//! `triage eval --by-time` (issue 39, item 1; docs/quality.md, "Judged as production runs"):
//! the cascade judged on the deployment's own traffic, split by time. A candidate classifier
//! is trained here, in-process, on what the train path would have read at the split `at`
//! (the large model's production answers and labellers' current feedback of the
//! [`TRAIN_DAYS`] days before it, each owner's share capped, erased tickets gone:
//! `pipeline::cascade::examples`), and answers each production ticket created after it.
//! The large model's answers to the same tickets, and what they cost, are already stored:
//! no provider call is made. The truth is the desk's label where a labeller gave one (not a
//! held one, and no giver's beyond its share of them: [`truth`]), else the large model's own
//! answer (against which the large model is right by definition, so
//! the figures are also given for each truth apart). Each run is stored (`time_split_run`,
//! V37): the Quality page leads with the newest.

mod figures;
pub mod store;
mod truth;
pub mod window;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};

pub use figures::{JudgedRow, Slice};

use super::metrics::{self, Paired};
use crate::{
    db,
    domain::{error::Result, versions::VersionPair},
    pipeline::cascade::caps::Shares,
    providers::{
        classifier::target::{CurvePoint, Thresholds},
        Policy,
    },
};

/// Days of results and feedback before the split the candidate learns from.
pub const TRAIN_DAYS: u32 = 30;
/// The threshold when neither the flags nor a cascade name one.
pub const DEFAULT_THRESHOLD: f64 = 0.9;

/// When the candidate answers locally.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// At a confidence of at least this.
    Threshold(f64),
    /// At the thresholds keeping this precision, cross-fitted on the training window.
    Precision(f64),
}

/// What to judge.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The split: the candidate learns from before it, and is judged on tickets after it.
    pub at: DateTime<Utc>,
    /// The end of the judged window.
    pub until: DateTime<Utc>,
    pub train_days: u32,
    /// The prompt and the large model whose stored answers are read.
    pub version: VersionPair,
    pub rule: Rule,
    pub policy: Policy,
    /// `TRIAGE_TRAIN_OWNER_SHARE` and `TRIAGE_TRAIN_GIVER_SHARE` (of the training set's weight,
    /// and of the judged window's desk truth).
    pub shares: Shares,
    /// Bytes the candidate's examples may hold where it runs (`operations::fits`); `None`: no
    /// bound but the rows'.
    pub budget: Option<u64>,
}

/// The time split's report (`--json`), as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `time_split_run.id`.
    pub stored: Option<i64>,
    pub at: DateTime<Utc>,
    pub until: DateTime<Utc>,
    /// The training window's start (`at` − the training days).
    pub trained_from: DateTime<Utc>,
    pub prompt_version: String,
    /// The large model whose stored answers are judged beside the cascade.
    pub model_version: String,
    pub policy_version: String,
    /// The candidate's version (`local-<hex>`; not stored: `triage train` stores one).
    pub local: String,
    /// Examples it learnt from: the model's answers and the desk's labels before the split.
    pub examples: usize,
    pub from_results: usize,
    pub from_feedback: usize,
    /// Rows of the training window not learnt from (an owner's cap, the rows' cap, the memory's
    /// budget), never silently.
    #[serde(default)]
    pub left_out: u64,
    /// The givers whose desk labels were beyond their share of the judged tickets' desk truth
    /// (`TRIAGE_TRAIN_GIVER_SHARE`), with how many: those tickets fell back to the audit's
    /// truth, else to the model's own answer.
    #[serde(default)]
    pub truth_capped: BTreeMap<String, u64>,
    pub rule: Rule,
    /// With a target precision: the thresholds derived on the training window.
    pub thresholds: Option<Thresholds>,
    /// Every judged ticket.
    pub all: Slice,
    /// The tickets a labeller labelled: the truth is the desk's.
    pub desk: Slice,
    /// The tickets no labeller labelled that the cascade's audit drew at random: the truth is
    /// the large model's answer on an unbiased sample (`None` in runs stored before the audit).
    #[serde(default)]
    pub audit: Option<Slice>,
    /// The others: the truth is the large model's own answer, so its accuracy there is 1 by
    /// definition and the figure says how often the cascade agrees with it.
    pub model: Slice,
    /// The desk's and the audit's tickets together, each audited one weighing 1 / its draw's
    /// share: the truth a precision may be judged by (`None` in runs stored before).
    #[serde(default)]
    pub graded: Option<Slice>,
    /// McNemar and the macro-F1 difference, cascade against the large model, every row.
    pub paired: Paired,
    /// The classifier's risk–coverage curve on the judged tickets, against their truth.
    pub curve: Vec<CurvePoint>,
}

/// Runs the time split `plan` and stores it.
pub async fn run(pool: &Pool, plan: &Plan, operator: &str) -> Result<Report> {
    let mut client = db::client(pool).await?;
    let learnt = window::learn(&mut client, plan).await?;
    let candidate = (Some(&learnt.model), learnt.thresholds.as_ref());
    let (mut judged, truth_capped) = window::judge(&client, plan, &[candidate]).await?;
    let rows = judged.remove(0);
    let (model, thresholds) = (learnt.model, learnt.thresholds);
    let (from_results, from_feedback) = (learnt.from_results, learnt.from_feedback);
    let learnt_left_out = learnt.left_out;
    let (policy, large, rule) = (&plan.policy, plan.version.model_version.as_str(), plan.rule);
    let all: Vec<&JudgedRow> = rows.iter().collect();
    let (desk, others): (Vec<&JudgedRow>, Vec<&JudgedRow>) = rows.iter().partition(|row| row.desk);
    let (audit, model_truth): (Vec<&JudgedRow>, Vec<&JudgedRow>) =
        others.into_iter().partition(|row| row.audited);
    let graded: Vec<&JudgedRow> = desk.iter().chain(&audit).copied().collect();
    let (cascade, large_scored) = figures::scored_pair(&all);
    let mut report = Report {
        stored: None,
        at: plan.at,
        until: plan.until,
        trained_from: plan.at - Duration::days(plan.train_days.into()),
        prompt_version: plan.version.prompt_version.to_string(),
        model_version: large.to_string(),
        policy_version: policy.version.clone(),
        local: model.version(),
        examples: model.examples(),
        from_results,
        from_feedback,
        left_out: learnt_left_out,
        truth_capped,
        rule,
        thresholds,
        all: figures::slice(&all),
        desk: figures::slice(&desk),
        audit: Some(figures::slice(&audit)),
        model: figures::slice(&model_truth),
        graded: Some(figures::slice(&graded)),
        paired: metrics::paired(&large_scored, &cascade),
        curve: figures::curve(&rows),
    };
    report.stored = Some(store::insert(&client, &report, operator).await?);
    tracing::info!(at = %plan.at, rows = rows.len(), "time split");
    Ok(report)
}
