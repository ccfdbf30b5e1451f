//! `triage eval --by-time` (issue 39, item 1; docs/quality.md, "Judged as production runs"):
//! the cascade judged on the deployment's own traffic, split by time. A candidate classifier
//! is trained here, in-process, on what the train path would have read at the split `at`
//! (the large model's production answers and labellers' current feedback of the
//! [`TRAIN_DAYS`] days before it, each owner's share capped, erased tickets gone:
//! `pipeline::cascade::examples`), and answers each production ticket created after it.
//! The large model's answers to the same tickets, and what they cost, are already stored:
//! no provider call is made. The truth is the desk's label where a labeller gave one, else
//! the large model's own answer (against which the large model is right by definition, so
//! the figures are also given for each truth apart). Each run is stored (`time_split_run`,
//! V37): the Quality page leads with the newest.

mod figures;
pub mod store;

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};

pub use figures::{JudgedRow, Slice};

use super::metrics::{self, Paired, Prediction};
use crate::{
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::{ModelVersion, VersionPair},
    },
    pipeline::cascade::examples,
    providers::{
        classifier::{
            target::{self, CurvePoint, Thresholds},
            LocalModel, TrainError,
        },
        Policy,
    },
};

/// Days of results and feedback before the split the candidate learns from.
pub const TRAIN_DAYS: u32 = 30;
/// The threshold when neither the flags nor a cascade name one.
pub const DEFAULT_THRESHOLD: f64 = 0.9;
/// Most tickets one split judges (the oldest after the split first).
const MAX_JUDGED: i64 = 200_000;

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
    /// `TRIAGE_TRAIN_OWNER_SHARE`.
    pub owner_share: f64,
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
    pub rule: Rule,
    /// With a target precision: the thresholds derived on the training window.
    pub thresholds: Option<Thresholds>,
    /// Every judged ticket.
    pub all: Slice,
    /// The tickets a labeller labelled: the truth is the desk's.
    pub desk: Slice,
    /// The others: the truth is the large model's own answer, so its accuracy there is 1 by
    /// definition and the figure says how often the cascade agrees with it.
    pub model: Slice,
    /// McNemar and the macro-F1 difference, cascade against the large model, every row.
    pub paired: Paired,
    /// The classifier's risk–coverage curve on the judged tickets, against their truth.
    pub curve: Vec<CurvePoint>,
}

/// The tickets created in `[$1, $2)` with the newest answer a model gave under the policy `$3`
/// and the prompt `$4`, the current labeller's label in the policy's departments (`$5`) and
/// what the answer cost (production work only; erased tickets are gone).
const JUDGED: &str = r#"
SELECT t.id, t.subject, t.message, r.department, r.is_urgent, r.model_version,
       r.idempotency_key, f.department, f.is_urgent,
       (SELECT coalesce(sum(c.cost_usd), 0)::float8 FROM provider_call c
        WHERE c.idempotency_key = r.idempotency_key)
FROM ticket t
JOIN ticket_evaluation te ON te.ticket_id = t.id
JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
LEFT JOIN ticket_feedback f ON f.ticket_id = t.id AND f.superseded_at IS NULL AND f.labeller
     AND f.department = ANY ($5::text[])
WHERE t.workload = 'production' AND t.created_at >= $1 AND t.created_at < $2
  AND r.answered_by = 'model' AND r.policy_version = $3 AND r.prompt_version = $4
ORDER BY t.created_at, t.id, r.computed_at DESC
LIMIT $6
"#;

/// Runs the time split `plan` and stores it.
pub async fn run(pool: &Pool, plan: &Plan, operator: &str) -> Result<Report> {
    if plan.until <= plan.at {
        let why = format!("{} is not before the end of the window", plan.at);
        return Err(InvalidRequest::new("at", why).into());
    }
    let policy = &plan.policy;
    let client = db::client(pool).await?;
    let days = plan.train_days as i32;
    let share = plan.owner_share;
    let results = examples::results_before(&client, plan.at, days, policy, share).await?;
    let feedback = examples::feedback_before(&client, plan.at, days, policy, share).await?;
    let (from_results, from_feedback) = (results.examples.len(), feedback.examples.len());
    let learnt = examples::merge(vec![results.examples, feedback.examples]);
    if learnt.is_empty() {
        let why = format!(
            "no results or feedback in the {days} days before {} to train on",
            plan.at
        );
        return Err(InvalidRequest::new("at", why).into());
    }
    let departments = policy.departments.clone();
    let rule = plan.rule;
    let (model, thresholds) = tokio::task::spawn_blocking(move || {
        let model = LocalModel::train(&learnt, &departments)?;
        let derived = match rule {
            Rule::Precision(p) => Some(target::derive(&learnt, &departments, p)),
            Rule::Threshold(_) => None,
        };
        Ok::<_, TrainError>((model, derived))
    })
    .await
    .expect("training does not panic")
    .map_err(|e| InvalidRequest::new("at", format!("the window before the split: {e}")))?;

    let large = plan.version.model_version.as_str();
    let window: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
        &plan.at,
        &plan.until,
        &policy.version,
        &plan.version.prompt_version,
        &policy.departments,
        &MAX_JUDGED,
    ];
    let (mut seen, mut costed) = (HashSet::new(), HashSet::new());
    let mut rows = Vec::new();
    for row in client.query(JUDGED, &window).await? {
        let answered_by = ModelVersion::from_stored(row.get(5));
        let called = format!("{}@{}", answered_by.model(), answered_by.effort());
        let ticket: uuid::Uuid = row.get(0);
        // The newest answer of the large model (alone or as a cascade's) per ticket.
        if called != large || !seen.insert(ticket) {
            continue;
        }
        let key: String = row.get(6);
        let large_answer = Prediction {
            department: row.get(3),
            is_urgent: row.get(4),
        };
        let desk: Option<String> = row.get(7);
        let (department, is_urgent) = match &desk {
            Some(department) => (department.clone(), row.get(8)),
            None => (
                large_answer.department.clone(),
                large_answer.is_urgent >= policy.urgent_threshold,
            ),
        };
        let (subject, message): (String, String) = (row.get(1), row.get(2));
        let local = model
            .predict_among(&subject, &message, &policy.departments)
            .map(|a| {
                let answer = Prediction {
                    department: a.department,
                    is_urgent: a.urgent_p,
                };
                (answer, a.confidence)
            });
        let answered_locally =
            local
                .as_ref()
                .is_some_and(|(answer, confidence)| match (&rule, &thresholds) {
                    (Rule::Threshold(t), _) => *confidence >= *t,
                    (Rule::Precision(_), Some(t)) => t.answers(&answer.department, *confidence),
                    (Rule::Precision(_), None) => false,
                });
        rows.push(JudgedRow {
            // Taken by the first ticket of a content: its duplicates share the one answer.
            cost_usd: if costed.insert(key.clone()) {
                row.get(9)
            } else {
                0.0
            },
            family: key,
            department,
            is_urgent,
            desk: desk.is_some(),
            large: large_answer,
            local,
            answered_locally,
        });
    }
    if rows.is_empty() {
        let why = format!(
            "no production ticket from {} to {} has an answer of {} under {}",
            plan.at, plan.until, plan.version, policy.version
        );
        return Err(InvalidRequest::new("at", why).into());
    }
    let all: Vec<&JudgedRow> = rows.iter().collect();
    let (desk, model_truth): (Vec<&JudgedRow>, Vec<&JudgedRow>) =
        rows.iter().partition(|row| row.desk);
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
        rule,
        thresholds,
        all: figures::slice(&all),
        desk: figures::slice(&desk),
        model: figures::slice(&model_truth),
        paired: metrics::paired(&large_scored, &cascade),
        curve: figures::curve(&rows),
    };
    report.stored = Some(store::insert(&client, &report, operator).await?);
    tracing::info!(at = %plan.at, rows = rows.len(), "time split");
    Ok(report)
}
