//! The two halves of a time split: what a candidate learns from before the split, and the
//! tickets after it, each with its truth and the large model's stored answer, judged by any
//! classifiers at once (`triage eval --by-time` judges the candidate; `triage retrain` the
//! candidate and the live classifier on the same rows).

use std::{
    collections::{BTreeMap, HashSet},
    sync::LazyLock,
};

use deadpool_postgres::{Client, GenericClient};
use futures::TryStreamExt;

use super::{truth, JudgedRow, Plan, Rule};
use crate::{
    domain::{
        error::{InvalidRequest, Result},
        versions::ModelVersion,
    },
    pipeline::cascade::{
        examples::{self, Provenance, Window},
        gather::Gathered,
        hold,
    },
    providers::classifier::{
        target::{self, Thresholds},
        LocalModel, TrainError,
    },
    quality::metrics::Prediction,
};

/// Most tickets one split judges (the oldest after the split first).
const MAX_JUDGED: i64 = 200_000;

/// A candidate trained on the window before the split, with what it learnt from.
pub struct Learnt {
    pub model: LocalModel,
    /// With a target precision: its thresholds, cross-fitted on the same examples.
    pub thresholds: Option<Thresholds>,
    pub from_results: usize,
    pub from_feedback: usize,
    /// Rows of the window not learnt from: beyond an owner's cap, the rows' cap or the budget.
    pub left_out: u64,
    /// The production tickets it learnt from (erasure's record) and, per source, who gave them.
    pub tickets: Vec<uuid::Uuid>,
    pub provenance: [Provenance; 2],
}

/// Trains the candidate on the model's answers and the labellers' current feedback of the
/// `plan.train_days` days before the split (each owner's share capped, erased tickets gone),
/// gathered within `plan.budget` bytes as `triage train` gathers (the newest first).
pub async fn learn(client: &mut Client, plan: &Plan) -> Result<Learnt> {
    if plan.until <= plan.at {
        let why = format!("{} is not before the end of the window", plan.at);
        return Err(InvalidRequest::new("at", why).into());
    }
    let (policy, days, shares) = (&plan.policy, plan.train_days, plan.shares);
    let mut gathered = Gathered::within(plan.budget);
    let window = Window::before(plan.at, days);
    // The desk's labels first: within a budget they are what is kept; their givers' shares
    // are of the weight beside the model's answers.
    let others = examples::results_weight(client, window, policy, shares.owner).await?;
    let caps = (shares, others);
    let feedback = examples::feedback(client, window, policy, caps, &mut gathered).await?;
    let results = examples::results(client, window, policy, shares.owner, &mut gathered).await?;
    let (from_results, from_feedback) = (results.rows, feedback.rows);
    let left_out = results.left_out.total() + feedback.left_out.total();
    let mut tickets = results.tickets;
    tickets.extend(feedback.tickets);
    let provenance = [results.provenance, feedback.provenance];
    let learnt = gathered.into_examples();
    if learnt.is_empty() {
        let why = format!(
            "no results or feedback in the {days} days before {} to train on",
            plan.at
        );
        return Err(InvalidRequest::new("at", why).into());
    }
    let departments = policy.departments.clone();
    let rule = plan.rule;
    // Seconds of arithmetic: off the async workers.
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
    Ok(Learnt {
        model,
        thresholds,
        from_results,
        from_feedback,
        left_out,
        tickets,
        provenance,
    })
}

/// A classifier judged on the window: it answers under `plan.rule`, at `thresholds` for a
/// target (none derived: it answers none locally); `None`, a classifier no longer stored,
/// answers none either.
pub type Judge<'a> = (Option<&'a LocalModel>, Option<&'a Thresholds>);

/// The tickets created in `[$1, $2)` with the newest answer a model gave under the policy `$3`
/// and the prompt `$4`, the current labeller's label in the policy's departments (`$5`; a held
/// label is none: `cascade::hold`), who gave it and when, what the answer cost, and the share
/// of the audit's draw when one sent it to the model (production work only; erased tickets
/// are gone).
static JUDGED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT t.id, t.subject, t.message, r.department, r.is_urgent, r.model_version,
                r.idempotency_key, f.department, f.is_urgent,
                (SELECT coalesce(sum(c.cost_usd), 0)::float8 FROM provider_call c
                 WHERE c.idempotency_key = r.idempotency_key),
                (SELECT min(a.share) FROM cascade_audit a
                 WHERE a.idempotency_key = r.idempotency_key),
                f.given_by, f.created_at
         FROM ticket t
         JOIN ticket_evaluation te ON te.ticket_id = t.id
         JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
         LEFT JOIN ticket_feedback f ON f.ticket_id = t.id AND f.superseded_at IS NULL
              AND f.labeller AND f.department = ANY ($5::text[]) AND NOT {held}
         WHERE t.workload = 'production' AND t.created_at >= $1 AND t.created_at < $2
           AND r.answered_by = 'model' AND r.policy_version = $3 AND r.prompt_version = $4
         ORDER BY t.created_at, t.id, r.computed_at DESC
         LIMIT $6",
        held = hold::held(5)
    )
});

/// The production tickets of `[plan.at, plan.until)` the large model answered, with their truth
/// (the desk's label where a labeller gave one, each giver's share of them capped, else the
/// large model's answer), as each of `judges` answers them: one list of rows per judge, in the
/// tickets' order, and the givers whose labels the cap made no truth, with how many. Streamed:
/// a ticket's text is held only while the judges read it.
pub async fn judge(
    client: &impl GenericClient,
    plan: &Plan,
    judges: &[Judge<'_>],
) -> Result<(Vec<Vec<JudgedRow>>, BTreeMap<String, u64>)> {
    let policy = &plan.policy;
    let large = plan.version.model_version.as_str();
    let window: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
        &plan.at,
        &plan.until,
        &policy.version,
        &plan.version.prompt_version,
        &policy.departments,
        &MAX_JUDGED,
    ];
    let statement = client.prepare(&JUDGED).await?;
    let rows = client.query_raw(&statement, window).await?;
    futures::pin_mut!(rows);
    let (mut seen, mut costed) = (HashSet::new(), HashSet::new());
    let mut judged = vec![Vec::new(); judges.len()];
    let mut labels = Vec::new();
    while let Some(row) = rows.try_next().await? {
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
        let drawn_share: Option<f64> = row.get(10);
        labels.push(desk.as_ref().map(|_| truth::Label {
            giver: row.get(11),
            at: row.get(12),
            drawn_share,
        }));
        let large_urgent = large_answer.is_urgent >= policy.urgent_threshold;
        // A desk label of the department alone leaves urgency unlabelled (V40): the large
        // model's, as for a ticket the desk did not label.
        let (department, is_urgent) = match &desk {
            Some(department) => (
                department.clone(),
                row.get::<_, Option<bool>>(8).unwrap_or(large_urgent),
            ),
            None => (large_answer.department.clone(), large_urgent),
        };
        let truth = JudgedRow {
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
            audited: drawn_share.is_some(),
            // An audited ticket stands for the 1 / share tickets the classifier answered with
            // it; the desk's label is its own truth.
            weight: match (desk.is_some(), drawn_share) {
                (false, Some(share)) => 1.0 / share,
                _ => 1.0,
            },
            large: large_answer,
            local: None,
            answered_locally: false,
        };
        let (subject, message): (&str, &str) = (row.get(1), row.get(2));
        for (rows, judge) in judged.iter_mut().zip(judges) {
            rows.push(answered(plan, *judge, subject, message, truth.clone()));
        }
    }
    if seen.is_empty() {
        let why = format!(
            "no production ticket from {} to {} has an answer of {} under {}",
            plan.at, plan.until, plan.version, policy.version
        );
        return Err(InvalidRequest::new("at", why).into());
    }
    let urgent_at = policy.urgent_threshold;
    let capped = truth::cap(&mut judged, &labels, plan.shares.giver, urgent_at);
    Ok((judged, capped))
}

/// Every production ticket created in `[$1, $2)` with a result under the policy `$3`, whoever
/// gave it (the large model, or a cascade's classifier itself), oldest first.
const WINDOW: &str = r#"
SELECT t.subject, t.message
FROM ticket t
WHERE t.workload = 'production' AND t.created_at >= $1 AND t.created_at < $2
  AND EXISTS (SELECT 1 FROM ticket_evaluation te
              JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
              WHERE te.ticket_id = t.id AND r.policy_version = $3)
ORDER BY t.created_at, t.id
LIMIT $4
"#;

/// For every ticket of the window (not only those [`judge`] has a truth for: under a cascade,
/// the ones its classifier answered have no large model's answer), whether each of `judges`
/// answers it locally. Streamed, as [`judge`].
pub async fn coverage(
    client: &impl GenericClient,
    plan: &Plan,
    judges: &[Judge<'_>],
) -> Result<Vec<Vec<bool>>> {
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&plan.at, &plan.until, &plan.policy.version, &MAX_JUDGED];
    let statement = client.prepare(WINDOW).await?;
    let rows = client.query_raw(&statement, params).await?;
    futures::pin_mut!(rows);
    let mut covers = vec![Vec::new(); judges.len()];
    while let Some(row) = rows.try_next().await? {
        let (subject, message): (&str, &str) = (row.get(0), row.get(1));
        for (covers, judge) in covers.iter_mut().zip(judges) {
            covers.push(local_answer(plan, *judge, subject, message).1);
        }
    }
    Ok(covers)
}

/// `truth`'s ticket as `judge` answers it.
fn answered(
    plan: &Plan,
    judge: Judge<'_>,
    subject: &str,
    message: &str,
    truth: JudgedRow,
) -> JudgedRow {
    let (local, answered_locally) = local_answer(plan, judge, subject, message);
    JudgedRow {
        local,
        answered_locally,
        ..truth
    }
}

/// What `judge` answers of a ticket, and whether it answers it locally under `plan.rule`.
fn local_answer(
    plan: &Plan,
    (model, thresholds): Judge<'_>,
    subject: &str,
    message: &str,
) -> (Option<(Prediction, f64)>, bool) {
    let Some(model) = model else {
        return (None, false);
    };
    let local = model
        .predict_among(subject, message, &plan.policy.departments)
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
            .is_some_and(|(answer, confidence)| match (plan.rule, thresholds) {
                (Rule::Threshold(t), _) => *confidence >= t,
                (Rule::Precision(_), Some(t)) => t.answers(&answer.department, *confidence),
                (Rule::Precision(_), None) => false,
            });
    (local, answered_locally)
}
