//! `triage retrain` (and the ops payload `{"op": "retrain"}`, which the template's
//! `RetrainSchedule` sends; docs/cascade.md, "Kept fresh"): a candidate classifier trained on
//! the configured cascade's traffic before its most recent days, judged beside the live
//! classifier on those days (which it did not learn from), and switched to only when the
//! switch gate passes (`quality::gate::switch`). Kept out, nothing is stored and the reason is
//! the run's result in the audit trail. Every run sets `models.retrain_failing_runs`.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;
use serde_json::json;

use super::super::{audit::Operator, fits};
use crate::{
    config::Config,
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::VersionPair,
    },
    pipeline::cascade::{
        models::{self, Stored},
        switch, targets, trained_on,
    },
    providers::Policy,
    quality::{
        by_time::{
            window::{self, Learnt},
            JudgedRow, Plan, Rule,
        },
        gate::switch::{decide, Decision, Judged},
    },
    telemetry::metric,
};

/// Days of traffic the candidate learns from (before the held-out days), by default.
pub const DEFAULT_DAYS: u32 = 30;
/// The most recent days the candidate is judged on and does not learn from, by default.
pub const DEFAULT_HOLDOUT_DAYS: u32 = 3;

/// What a retrain did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrained {
    /// `true`: configured cascades now answer new tickets with `candidate`.
    pub switched: bool,
    /// Why it was switched to or kept out, with both classifiers' figures.
    pub reason: String,
    pub candidate: String,
    /// The classifier that answered new tickets when the run started.
    pub live: String,
    pub target_precision: f64,
    /// The candidate learnt from `[trained_from, judged_from)` and was judged, beside the live
    /// classifier, on the tickets of `[judged_from, judged_until)`.
    pub trained_from: DateTime<Utc>,
    pub judged_from: DateTime<Utc>,
    pub judged_until: DateTime<Utc>,
    pub examples: usize,
    pub judged: usize,
    pub candidate_local_share: f64,
    pub candidate_precision: Option<f64>,
    /// What the precisions are judged against (the same truth as `triage cascade status`).
    pub truth: &'static str,
    pub live_local_share: f64,
    pub live_precision: Option<f64>,
    /// The givers whose desk labels were beyond their share of the judged days' desk truth
    /// (`TRIAGE_TRAIN_GIVER_SHARE`), with how many fell back to the audit's truth or none.
    pub truth_capped: BTreeMap<String, u64>,
    /// What the candidate learnt from, per source, as `local_model.provenance` records it:
    /// owners and givers, each giver's rows and weight, and whom the caps cut.
    pub provenance: serde_json::Value,
    /// Runs in a row, this one included, that did not switch (`RetrainFailingAlarm` at 3).
    pub failing_runs: i64,
}

/// Retrains, and sets the failing-runs metric however the run ends.
pub async fn retrain(
    pool: &Pool,
    config: &Config,
    policy: &Policy,
    (days, holdout_days): (u32, u32),
    operator: &Operator,
) -> Result<Retrained> {
    let ran = attempt(pool, config, policy, (days, holdout_days), operator).await;
    let failed_before = failing_before(&db::client(pool).await?).await?;
    let failing_runs = match &ran {
        Ok(run) if run.switched => 0,
        _ => failed_before + 1,
    };
    metric::retrain(failing_runs);
    ran.map(|run| Retrained {
        failing_runs,
        ..run
    })
}

/// Finished retrains since the last one that switched (the running one is still `started`).
const FAILING_BEFORE: &str = r#"
SELECT count(*) FROM operation_audit
WHERE op = 'retrain' AND status <> 'started'
  AND id > coalesce((SELECT max(id) FROM operation_audit
                     WHERE op = 'retrain' AND status = 'ok'
                       AND (result->>'switched')::boolean), 0)
"#;

async fn failing_before(client: &impl GenericClient) -> Result<i64> {
    Ok(client.query_one(FAILING_BEFORE, &[]).await?.get(0))
}

async fn attempt(
    pool: &Pool,
    config: &Config,
    policy: &Policy,
    (days, holdout_days): (u32, u32),
    operator: &Operator,
) -> Result<Retrained> {
    let configured = &config.versions.model;
    let refused = |why: String| InvalidRequest::new("model_version", why);
    let cascade = configured.cascade().ok_or_else(|| {
        refused(format!(
            "the configured model version {configured} (TRIAGE_MODEL) is not a cascade: \
             retrain keeps a cascade's classifier fresh"
        ))
    })?;
    let target = cascade.threshold.target().ok_or_else(|| {
        refused(format!(
            "{configured} answers at a fixed confidence: retrain keeps a target precision, \
             named as cascade(LOCAL,pP,MODEL@EFFORT) (docs/cascade.md)"
        ))
    })?;
    for (name, value, most) in [("days", days, 366), ("holdout_days", holdout_days, 30)] {
        if !(1..=most).contains(&value) {
            let why = format!("{value}: 1 to {most}");
            return Err(InvalidRequest::new(name, why).into());
        }
    }
    let mut client = db::client(pool).await?;
    let live = switch::live(&client)
        .await?
        .unwrap_or_else(|| cascade.local.clone());
    let now: DateTime<Utc> = client.query_one("SELECT now()", &[]).await?.get(0);
    let plan = Plan {
        at: now - Duration::days(holdout_days.into()),
        until: now,
        train_days: days,
        version: VersionPair {
            prompt_version: config.versions.prompt.clone(),
            model_version: cascade.large.clone(),
        },
        rule: Rule::Precision(target),
        policy: policy.clone(),
        shares: (&config.labelling).into(),
        budget: fits::training_budget(operator).map(|budget| budget.bytes),
    };
    let learnt = window::learn(&mut client, &plan).await?;
    // The live classifier under its own thresholds for the target (retired, or without them,
    // it answers nothing locally), on the same tickets as the candidate.
    let live_model = models::load(&client, &live).await?;
    let live_thresholds = match &live_model {
        Some(_) => targets::load(&client, &live, target).await?,
        None => None,
    };
    let judges = [
        (Some(&learnt.model), learnt.thresholds.as_ref()),
        (live_model.as_deref(), live_thresholds.as_deref()),
    ];
    let (judged, truth_capped) = window::judge(&client, &plan, &judges).await?;
    let covers = window::coverage(&client, &plan, &judges).await?;
    let [candidate, live_judged]: [Judged; 2] = judged
        .iter()
        .zip(covers)
        .map(|(rows, covers)| Judged {
            rows: with_truth(rows),
            covers,
        })
        .collect::<Vec<_>>()
        .try_into()
        .expect("one list of rows per judge");
    let version = learnt.model.version();
    let (switched, reason) = if version == live {
        (
            true,
            format!("the candidate is the live classifier {live}: nothing to switch"),
        )
    } else {
        match decide(&candidate, &live_judged, target) {
            Decision::KeepOut(why) => (false, why),
            Decision::Switch(why) => {
                let transaction = client.transaction().await?;
                store(&transaction, &plan, &learnt, operator).await?;
                switch::switch(&transaction, &version, operator.as_str(), &why).await?;
                transaction.commit().await?;
                (true, why)
            }
        }
    };
    tracing::info!(candidate = %version, %live, switched, "retrain");
    Ok(Retrained {
        switched,
        reason,
        candidate: version,
        live,
        target_precision: target,
        trained_from: plan.at - Duration::days(days.into()),
        judged_from: plan.at,
        judged_until: plan.until,
        examples: learnt.model.examples(),
        judged: candidate.n(),
        candidate_local_share: candidate.local_share(),
        candidate_precision: candidate.precision(),
        truth: crate::quality::live::TRUTH,
        live_local_share: live_judged.local_share(),
        live_precision: live_judged.precision(),
        truth_capped,
        provenance: provenance(&plan, &learnt),
        failing_runs: 0,
    })
}

/// Each ticket with a truth the gate may judge by (the desk's label, or an audited ticket's
/// large-model answer; never the large model's answer where only a classifier's doubt sent the
/// ticket to it): answered locally, then right or not.
fn with_truth(rows: &[JudgedRow]) -> Vec<Option<bool>> {
    rows.iter()
        .filter(|row| row.desk || row.audited)
        .map(|row| {
            let local = row.local.as_ref().filter(|_| row.answered_locally);
            local.map(|(answer, _)| answer.department == row.department)
        })
        .collect()
}

/// Stores the candidate as `triage train` stores a classifier: its artefact, sources, window
/// and provenance, the tickets it learnt from (for erasure) and its thresholds for the target.
async fn store(
    client: &impl GenericClient,
    plan: &Plan,
    learnt: &Learnt,
    operator: &Operator,
) -> Result<()> {
    let days = plan.train_days;
    let sources = json!([
        {"source": format!("results:{days}"), "examples": learnt.from_results},
        {"source": format!("feedback:{days}"), "examples": learnt.from_feedback},
    ]);
    let version = learnt.model.version();
    let stored = Stored {
        sources: &sources,
        provenance: &provenance(plan, learnt),
        trained_by: operator.as_str(),
        trained_from: Some(plan.at - Duration::days(days.into())),
    };
    models::store(client, &learnt.model, stored).await?;
    trained_on::record(client, &version, &learnt.tickets).await?;
    if let Some(thresholds) = &learnt.thresholds {
        targets::store(client, &version, thresholds, operator.as_str()).await?;
    }
    Ok(())
}

/// Where the candidate's examples came from, per source (`local_model.provenance`).
fn provenance(plan: &Plan, learnt: &Learnt) -> serde_json::Value {
    let days = plan.train_days;
    let [results, feedback] = &learnt.provenance;
    json!([
        {"source": format!("results:{days}"), "days": days, "until": plan.at,
         "examples": learnt.from_results, "from": results},
        {"source": format!("feedback:{days}"), "days": days, "until": plan.at,
         "examples": learnt.from_feedback, "from": feedback},
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quality::metrics::Prediction;

    fn row(desk: bool, audited: bool, right: bool) -> JudgedRow {
        let prediction = |d: &str| Prediction {
            department: d.into(),
            is_urgent: 0.0,
        };
        JudgedRow {
            family: String::new(),
            department: "billing".into(),
            is_urgent: false,
            desk,
            audited,
            weight: 1.0,
            large: prediction("billing"),
            cost_usd: 0.0,
            local: Some((prediction(if right { "billing" } else { "sales" }), 0.99)),
            answered_locally: true,
        }
    }

    /// The gate judges by the desk's labels and the audit's draws; the large model's answers
    /// on tickets nothing drew at random are no truth for it.
    #[test]
    fn the_gate_judges_by_desk_and_audit_truth_only() {
        let rows = [
            row(true, false, true),
            row(false, true, false),
            row(false, false, true),
            row(true, true, true),
        ];
        assert_eq!(with_truth(&rows), vec![Some(true), Some(false), Some(true)]);
    }
}
