//! Scoring one version of a run: its answers against the labels ([`metrics`]), and what
//! its calls cost, from the ledger.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use super::{
    metrics::{self, Prediction, Scored},
    pending::Labelled,
    Miss, RunFigures, MISSES_KEPT,
};
use crate::domain::{error::Result, versions::VersionPair};

const ANSWERS: &str = r#"
SELECT idempotency_key, department, is_urgent FROM evaluation_result
WHERE idempotency_key = ANY($1)
"#;

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
    let answers: HashMap<String, Prediction> = client
        .query(ANSWERS, &[&keys])
        .await?
        .into_iter()
        .map(|row| {
            let prediction = Prediction {
                department: row.get(1),
                is_urgent: row.get(2),
            };
            (row.get(0), prediction)
        })
        .collect();
    let scored: Vec<Scored> = rows
        .iter()
        .zip(keys)
        .map(|(row, key)| Scored {
            department: row.department.clone(),
            is_urgent: row.is_urgent,
            predicted: answers.get(key).cloned(),
        })
        .collect();
    let misclassified = rows
        .iter()
        .zip(&scored)
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
    let ledger = client.query_one(LEDGER, &[&keys, &started_at]).await?;
    let n = rows.len();
    let figures = RunFigures {
        version: version.to_string(),
        n,
        answered: scored.iter().filter(|s| s.predicted.is_some()).count(),
        calls: ledger.get(0),
        input_tokens: ledger.get(1),
        output_tokens: ledger.get(2),
        cost_usd: ledger.get(3),
        cost_per_ticket_usd: if n == 0 {
            0.0
        } else {
            ledger.get::<_, f64>(4) / n as f64
        },
        contract_violations: ledger.get(5),
        latency_p50_ms: ledger.get(6),
        latency_p95_ms: ledger.get(7),
        dead_letters: ledger.get(8),
        department: metrics::department(&scored),
        urgent: metrics::urgent(&scored, threshold),
        misclassified,
    };
    Ok((figures, scored))
}
