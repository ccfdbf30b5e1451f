//! `triage eval --thresholds` (docs/quality.md, "The cascade"): where to set a cascade's
//! threshold, measured on the set's **dev** split (the test split only reports; a threshold
//! chosen on it would flatter the cascade). The cascade's large model is evaluated over the
//! dev rows as an ordinary eval run (through the pipeline: deduped, budgeted, stored), the
//! local classifier answers each row here, in-process, as the worker asks it (through
//! `LocalProvider` and the contract), and every threshold of a grid is then read off the two:
//! a row whose local confidence reaches the threshold takes the local answer and costs nothing,
//! any other the large model's answer at what that answer cost. So each point is what an eval
//! of the cascade at that threshold reports (tested), without a run per threshold.
//! The sweep is stored (`threshold_sweep`, V26) for the Quality page, which draws accuracy
//! against the share answered locally.

pub mod sweeps;

use std::{collections::HashMap, time::Duration};

use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    conclude, follow,
    metrics::{self, Prediction, Scored},
    score,
    set::{self, Split, SHIPPED_DIGEST},
    source::SetSource,
    start, Plan, Progress, SetInfo, Watch,
};
use crate::{
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::{Cascade, VersionPair},
    },
    pipeline::cascade::{self, models},
    providers::{EvaluationRequest, Prompt, Tier},
};

/// One threshold's figures over the dev rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub threshold: f64,
    /// Rows.
    pub n: usize,
    /// Share of the rows the local classifier answers at this threshold.
    pub local_share: f64,
    pub department_accuracy: f64,
    /// `[low, high]`: 95% percentile bootstrap over families, as every run's.
    #[serde(default)]
    pub department_accuracy_ci: Option<[f64; 2]>,
    #[serde(default)]
    pub urgent_recall: f64,
    /// What the large model's answers to the other rows cost, per row.
    pub cost_per_ticket_usd: f64,
    /// The same over the rows whose department is right; `None` when none is.
    pub cost_per_correct_usd: Option<f64>,
    /// The threshold the cascade swept names.
    #[serde(default)]
    pub named: bool,
}

/// The large model alone over the same rows: what every point is read against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Large {
    /// `prompt/model@effort`.
    pub version: String,
    /// Calls this sweep's run made (0 when every answer was stored already).
    pub calls: i64,
    pub cost_usd: f64,
    pub department_accuracy: f64,
    pub department_accuracy_ci: Option<[f64; 2]>,
    pub cost_per_ticket_usd: f64,
    pub cost_per_correct_usd: Option<f64>,
}

/// `triage eval --thresholds`'s report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    /// The large model's eval run (`triage eval --list` shows it while under way).
    pub run_id: Uuid,
    pub set: SetInfo,
    /// `prompt/cascade(…)`: the cascade swept (its threshold is one point of many).
    pub version: String,
    /// `local-<hex>`.
    pub local: String,
    /// Every answer of the large model is in: the points are computed and stored. Otherwise
    /// there are none; run the same command again once the workers have answered.
    pub complete: bool,
    pub progress: Progress,
    pub large: Large,
    pub points: Vec<Point>,
    /// The stored sweep (`threshold_sweep.id`), when complete.
    pub stored: Option<i64>,
    /// The classifier was trained on this set's dev split (`triage train --from set:…:dev`):
    /// its answers to these rows are answers to its own examples, surer and righter than on
    /// tickets it never saw, so the sweep flatters it. Choose on rows it did not learn
    /// (docs/quality.md, "The cascade").
    pub learnt_these_rows: bool,
}

/// The thresholds swept: 0 (the local classifier alone), 0.30 to 1.00 by 0.05, and the one
/// the cascade names.
pub fn grid(named: f64) -> Vec<f64> {
    let mut grid: Vec<f64> = std::iter::once(0.0)
        .chain((30..=100).step_by(5).map(|k| f64::from(k) / 100.0))
        .chain(std::iter::once(named))
        .collect();
    grid.sort_by(f64::total_cmp);
    grid.dedup();
    grid
}

/// Refuses what a sweep cannot be: a split other than dev, or anything but one cascade.
/// Answers the split (dev) and the cascade.
pub fn check(
    split: Option<Split>,
    versions: &[VersionPair],
) -> Result<(Split, Cascade), InvalidRequest> {
    if split == Some(Split::Test) {
        return Err(InvalidRequest::new(
            "split",
            "--thresholds sweeps the dev split: the threshold is chosen on dev, and the test \
             split only reports (evaluate the chosen cascade on test with triage eval)"
                .into(),
        ));
    }
    let cascade = match versions {
        [version] => version.model_version.cascade(),
        _ => None,
    };
    let cascade = cascade.ok_or_else(|| {
        InvalidRequest::new(
            "version",
            "--thresholds takes one version, a cascade: --version \
             PROMPT/cascade(local-<hex>,THRESHOLD,MODEL@EFFORT)"
                .into(),
        )
    })?;
    if cascade.threshold.confidence().is_none() {
        return Err(InvalidRequest::new(
            "version",
            "--thresholds sweeps a cascade with a threshold (0.9); a target's (p0.97) \
             thresholds and risk-coverage curve come with the classifier (triage models)"
                .into(),
        ));
    }
    Ok((Split::Dev, cascade))
}

/// One dev row as the sweep reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRow {
    pub family: String,
    pub department: String,
    pub is_urgent: bool,
    /// The large model's answer (`None`: dead letter).
    pub large: Option<Prediction>,
    /// The local classifier's answer and its confidence (`None`: outside the contract, so
    /// the large model is asked whatever the threshold).
    pub local: Option<(Prediction, f64)>,
    /// What the large model's answer cost; a content shared by several rows counts once.
    pub cost_usd: f64,
}

/// The figures at each of `thresholds`: pure, so a table of cases tests it.
pub fn points(
    rows: &[SweepRow],
    thresholds: &[f64],
    named: f64,
    urgent_threshold: f64,
) -> Vec<Point> {
    let n = rows.len();
    let per_row = |x: f64| if n == 0 { 0.0 } else { x / n as f64 };
    thresholds
        .iter()
        .map(|&threshold| {
            let (mut local, mut cost) = (0, 0.0);
            let scored: Vec<Scored> = rows
                .iter()
                .map(|row| {
                    let predicted = match &row.local {
                        Some((answer, confidence)) if *confidence >= threshold => {
                            local += 1;
                            Some(answer.clone())
                        }
                        _ => {
                            cost += row.cost_usd;
                            row.large.clone()
                        }
                    };
                    Scored {
                        family: row.family.clone(),
                        department: row.department.clone(),
                        is_urgent: row.is_urgent,
                        predicted,
                    }
                })
                .collect();
            let department = metrics::department(&scored);
            Point {
                threshold,
                n,
                local_share: per_row(f64::from(local)),
                department_accuracy: department.accuracy,
                department_accuracy_ci: department.accuracy_ci,
                urgent_recall: metrics::urgent(&scored, urgent_threshold).recall,
                cost_per_ticket_usd: per_row(cost),
                cost_per_correct_usd: score::per_correct(cost, &scored),
                named: threshold == named,
            }
        })
        .collect()
}

/// What each of the run's content keys cost, all its calls.
const COSTS: &str = r#"
SELECT idempotency_key, coalesce(sum(cost_usd), 0)::float8 FROM provider_call
WHERE idempotency_key = ANY($1)
GROUP BY idempotency_key
"#;

/// Sweeps the threshold of `plan`'s one version, a cascade ([`check`]ed), over the dev rows
/// of its set: the large model's eval run (waited for as `watch` says), the local answers
/// here, the points, stored when the run is complete.
pub async fn sweep(pool: &Pool, plan: &Plan, operator: &str, watch: &Watch) -> Result<Sweep> {
    let (split, cascade) = check(plan.split, &plan.versions)?;
    let swept = &plan.versions[0];
    let rows = plan.set.rows_of(Some(split));
    if rows.is_empty() {
        return Err(InvalidRequest::new(
            "set",
            "the set has no dev rows to choose a threshold on".into(),
        )
        .into());
    }
    let client = db::client(pool).await?;
    let model = models::load(&client, &cascade.local)
        .await?
        .ok_or_else(|| {
            let why = format!("{} is not stored (triage train makes it)", cascade.local);
            InvalidRequest::new("model_version", why)
        })?;
    let learnt_these_rows = learnt_from(&client, &cascade.local, &plan.set.digest).await?;
    drop(client);
    let large = VersionPair {
        prompt_version: swept.prompt_version.clone(),
        model_version: cascade.large.clone(),
    };
    let run = Plan {
        split: Some(split),
        versions: vec![large],
        ..plan.clone()
    };
    let pending = start(pool, &run, operator).await?;
    let progress = follow(pool, &pending, watch).await?;
    let report = conclude(pool, &pending, progress).await?;
    let figures = &report.runs[0];
    let mut sweep = Sweep {
        run_id: report.run_id,
        set: report.set.clone(),
        version: swept.to_string(),
        local: cascade.local.clone(),
        complete: report.complete,
        progress: report.progress,
        large: Large {
            version: figures.version.clone(),
            calls: figures.calls,
            cost_usd: figures.cost_usd,
            department_accuracy: figures.department.accuracy,
            department_accuracy_ci: figures.department.accuracy_ci,
            cost_per_ticket_usd: figures.cost_per_ticket_usd,
            cost_per_correct_usd: figures.cost_per_correct_usd,
        },
        points: Vec::new(),
        stored: None,
        learnt_these_rows,
    };
    if !report.complete {
        return Ok(sweep);
    }

    // The large model's answers and what each cost.
    let client = db::client(pool).await?;
    let keys = &pending.keys[0];
    let (answers, _) = score::answers(&client, keys).await?;
    let mut costs: HashMap<String, f64> = client
        .query(COSTS, &[keys])
        .await?
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    // The local classifier, asked as the worker asks it: the prompt and policy of the run.
    let prompt = Prompt::load(swept.prompt_version.as_str(), &plan.policy).ok_or_else(|| {
        let why = format!("{:?} is not in this build", swept.prompt_version.as_str());
        InvalidRequest::new("prompt_version", why)
    })?;
    let mut sweep_rows = Vec::with_capacity(rows.len());
    for ((row, labelled), key) in rows.iter().zip(&pending.rows).zip(keys) {
        let request = EvaluationRequest {
            subject: &row.subject,
            message: &row.message,
            prompt: &prompt,
            model: &swept.model_version,
            policy: &plan.policy,
            timeout: Duration::ZERO,
            tier: Tier::Online,
        };
        let local = cascade::ask(model.clone(), request).await.map(|answer| {
            let prediction = Prediction {
                department: answer.evaluation.department,
                is_urgent: answer.evaluation.is_urgent,
            };
            (prediction, answer.confidence)
        });
        sweep_rows.push(SweepRow {
            family: score::family(labelled).to_string(),
            department: labelled.department.clone(),
            is_urgent: labelled.is_urgent,
            large: answers.get(key).cloned(),
            local,
            // Taken by the first row of a content: its duplicates share the one answer.
            cost_usd: costs.remove(key).unwrap_or(0.0),
        });
    }
    let threshold = plan.policy.urgent_threshold;
    let named = cascade.threshold.confidence().unwrap_or(1.0);
    sweep.points = points(&sweep_rows, &grid(named), named, threshold);
    let new = sweeps::NewSweep {
        version: swept,
        set_digest: &plan.set.digest,
        split,
        points: &sweep.points,
        run_by: operator,
    };
    sweep.stored = Some(sweeps::insert(&client, &new).await?);
    tracing::info!(version = %swept, points = sweep.points.len(), "threshold sweep");
    Ok(sweep)
}

/// Whether the classifier `local` was trained on the dev split of the set whose digest is
/// `digest`: a `set:SOURCE:dev` among its sources that is this set, by digest where the source
/// can be read here (the shipped set, a file; not an S3 set).
async fn learnt_from(
    client: &impl deadpool_postgres::GenericClient,
    local: &str,
    digest: &str,
) -> Result<bool> {
    let Some(row) = client
        .query_opt(
            "SELECT sources FROM local_model WHERE version = $1",
            &[&local],
        )
        .await?
    else {
        return Ok(false);
    };
    Ok(names_set(&row.get(0), digest))
}

/// Whether `sources` (`local_model.sources`) hold the dev split of the set `digest` names.
fn names_set(sources: &serde_json::Value, digest: &str) -> bool {
    let mut named = sources.as_array().into_iter().flatten().filter_map(|s| {
        let source = s["source"].as_str()?.strip_prefix("set:")?;
        let source = source.strip_suffix(":dev")?.parse::<SetSource>().ok()?;
        Some((source, s["columns"].as_str()))
    });
    named.any(|(source, columns)| match &source {
        SetSource::Shipped => digest == SHIPPED_DIGEST,
        SetSource::Path(path) => std::fs::read(path).is_ok_and(|b| {
            let columns = columns.and_then(|c| c.parse::<set::Columns>().ok());
            set::Format::of(&source.to_string(), columns.as_ref()).digest(&b) == digest
        }),
        SetSource::S3(_) | SetSource::Feedback { .. } => false,
    })
}

#[cfg(test)]
mod tests;
