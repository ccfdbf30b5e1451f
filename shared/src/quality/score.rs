//! Scoring one version of a run: its answers against the labels ([`metrics`]), and what
//! its calls cost, from the ledger; and the offline baseline, the rules classifier answering
//! the same rows in this process.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use super::{
    metrics::{self, Prediction, Scored},
    pending::Labelled,
    runs, Miss, RunFigures, MISSES_KEPT,
};
use crate::{
    domain::{
        error::Result,
        versions::{ModelVersion, VersionPair},
    },
    providers::{
        contract, rules::RulesProvider, EvaluationRequest, Framing, Policy, Prompt, Provider, Tier,
    },
};

/// The baseline's name in a report.
pub const BASELINE: &str = "rules@offline (baseline)";

const ANSWERS: &str = r#"
SELECT idempotency_key, department, is_urgent, answered_by = 'local' FROM evaluation_result
WHERE idempotency_key = ANY($1)
"#;

/// The stored answers under `keys`, and the keys a cascade's local classifier answered.
pub(super) async fn answers(
    client: &impl GenericClient,
    keys: &[String],
) -> Result<(HashMap<String, Prediction>, HashSet<String>)> {
    let mut local = HashSet::new();
    let answers = client
        .query(ANSWERS, &[&keys])
        .await?
        .into_iter()
        .map(|row| {
            let prediction = Prediction {
                department: row.get(1),
                is_urgent: row.get(2),
            };
            if row.get::<_, bool>(3) {
                local.insert(row.get::<_, String>(0));
            }
            (row.get(0), prediction)
        })
        .collect();
    Ok((answers, local))
}

/// The ledger of the run's keys: this run's calls (since `$2`), all calls' cost, contract
/// violations and latency, and the dead letters.
const LEDGER: &str = r#"
SELECT count(*) FILTER (WHERE started_at >= $2),
       coalesce(sum(input_tokens) FILTER (WHERE started_at >= $2), 0)::int8,
       coalesce(sum(output_tokens) FILTER (WHERE started_at >= $2), 0)::int8,
       coalesce(sum(cost_usd) FILTER (WHERE started_at >= $2), 0)::float8,
       coalesce(sum(cost_usd), 0)::float8,
       count(*) FILTER (WHERE outcome = 'contract_violation'),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE outcome = 'ok'),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE outcome = 'ok'),
       (SELECT count(*) FROM evaluation_outbox o
        WHERE o.idempotency_key = ANY($1) AND o.status = 'dead'
          AND NOT EXISTS (SELECT 1 FROM evaluation_result r WHERE r.idempotency_key = o.idempotency_key))
FROM provider_call
WHERE idempotency_key = ANY($1)
"#;

/// One version's figures over `rows` (whose content keys under it are `keys`), and each row
/// scored for the paired comparison; `started_at` tells this run's calls from earlier ones.
pub(super) async fn score(
    client: &impl GenericClient,
    version: &VersionPair,
    rows: &[Labelled],
    keys: &[String],
    threshold: f64,
    started_at: DateTime<Utc>,
) -> Result<(RunFigures, Vec<Scored>)> {
    let (answers, local) = answers(client, keys).await?;
    let scored: Vec<Scored> = rows
        .iter()
        .zip(keys)
        .map(|(row, key)| Scored {
            family: family(row).to_string(),
            department: row.department.clone(),
            is_urgent: row.is_urgent,
            predicted: answers.get(key).cloned(),
        })
        .collect();
    let ledger = client.query_one(LEDGER, &[&keys, &started_at]).await?;
    let n = rows.len();
    let mut figures = figures(version.to_string(), rows, &scored, threshold);
    figures.calls = ledger.get(0);
    figures.input_tokens = ledger.get(1);
    figures.output_tokens = ledger.get(2);
    figures.cost_usd = ledger.get(3);
    let answers_cost: f64 = ledger.get(4);
    figures.cost_per_ticket_usd = if n == 0 { 0.0 } else { answers_cost / n as f64 };
    figures.cost_per_correct_usd = per_correct(answers_cost, &scored);
    let answered_locally = keys.iter().filter(|k| local.contains(*k)).count();
    figures.local_share = if n == 0 {
        0.0
    } else {
        answered_locally as f64 / n as f64
    };
    figures.contract_violations = ledger.get(5);
    figures.latency_p50_ms = ledger.get(6);
    figures.latency_p95_ms = ledger.get(7);
    figures.dead_letters = ledger.get(8);
    Ok((figures, scored))
}

/// `cost` over the rows whose department is right; `None` when none is.
pub(super) fn per_correct(cost: f64, scored: &[Scored]) -> Option<f64> {
    let right = scored
        .iter()
        .filter(|s| {
            s.predicted
                .as_ref()
                .is_some_and(|p| p.department == s.department)
        })
        .count();
    (right > 0).then(|| cost / right as f64)
}

/// A row's family: the set's, else the row itself (a pending run recorded before families).
pub(super) fn family(row: &Labelled) -> &str {
    if row.family.is_empty() {
        &row.id
    } else {
        &row.family
    }
}

/// The figures of `scored` (the answers to `rows`), with nothing paid: the ledger's part is
/// the caller's.
fn figures(version: String, rows: &[Labelled], scored: &[Scored], threshold: f64) -> RunFigures {
    let misclassified = rows
        .iter()
        .zip(scored)
        .filter(|(_, s)| {
            s.predicted.as_ref().is_none_or(|p| {
                p.department != s.department || (p.is_urgent >= threshold) != s.is_urgent
            })
        })
        .take(MISSES_KEPT)
        .map(|(row, s)| Miss {
            id: row.id.clone(),
            ticket_id: row.ticket_id,
            department: row.department.clone(),
            predicted: s.predicted.as_ref().map(|p| p.department.clone()),
            is_urgent: row.is_urgent,
            predicted_urgent: s.predicted.as_ref().map(|p| p.is_urgent),
        })
        .collect();
    let by_family = metrics::family_table(scored, threshold);
    RunFigures {
        version,
        n: rows.len(),
        families: by_family.len(),
        answered: scored.iter().filter(|s| s.predicted.is_some()).count(),
        calls: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0.0,
        cost_per_ticket_usd: 0.0,
        // Nothing paid (the ledger's part is the caller's).
        cost_per_correct_usd: per_correct(0.0, scored),
        local_share: 0.0,
        contract_violations: 0,
        dead_letters: 0,
        latency_p50_ms: None,
        latency_p95_ms: None,
        department: metrics::department(scored),
        urgent: metrics::urgent(scored, threshold),
        misclassified,
        by_family,
    }
}

/// The offline rules classifier (`rules@offline`) over `rows`, answered here from each eval
/// ticket's text: no job, no provider call, no ledger row, so it costs nothing and is always
/// there to read a version against. A row whose ticket is gone (erased) has no answer.
pub(super) async fn baseline(
    client: &impl GenericClient,
    rows: &[Labelled],
    policy: &Policy,
) -> Result<(RunFigures, Vec<Scored>)> {
    let ids: Vec<uuid::Uuid> = rows.iter().map(|r| r.ticket_id).collect();
    let texts = runs::run_ticket_texts(client, &ids).await?;
    // The rules read neither the prompt nor the model; the request only needs them.
    let prompt = Prompt {
        version: String::new(),
        text: String::new(),
        framing: Framing::Plain,
        registered_as: String::new(),
    };
    let model = ModelVersion::rules();
    let mut scored = Vec::with_capacity(rows.len());
    for row in rows {
        let predicted = match texts.get(&row.ticket_id) {
            Some((subject, message)) => {
                let request = EvaluationRequest {
                    subject,
                    message,
                    prompt: &prompt,
                    model: &model,
                    policy,
                    timeout: std::time::Duration::ZERO,
                    tier: Tier::Online,
                };
                RulesProvider
                    .evaluate(request)
                    .await
                    .ok()
                    .and_then(|reply| contract::validate(&reply.output, policy).ok())
                    .map(|answer| Prediction {
                        department: answer.department,
                        is_urgent: answer.is_urgent,
                    })
            }
            None => None,
        };
        scored.push(Scored {
            family: family(row).to_string(),
            department: row.department.clone(),
            is_urgent: row.is_urgent,
            predicted,
        });
    }
    let figures = figures(BASELINE.into(), rows, &scored, policy.urgent_threshold);
    Ok((figures, scored))
}
