//! `triage eval` (docs/quality.md): how right each version is on a labelled set, measured
//! *through the pipeline*. The set's rows become tickets and jobs marked as eval work
//! (`workload = 'eval'`, bulk lane), so the content key, the ledger's dedup, the shared rate
//! limit and the daily budget all apply (a second run of a version over a set makes no call),
//! while no production report counts them. Workers answer the jobs as any other; this module
//! queues them, waits for their answers (or reports what is answered so far), and scores the
//! answers against the labels with [`metrics`]. A finished run is stored in `eval_run`
//! ([`store`]); the promote gate ([`gate`]) reads it.
//!
//! Stopping (Ctrl-C) leaves only queued jobs and stored answers: a rerun queues nothing new
//! and continues where the workers were.

pub mod gate;
pub mod metrics;
pub mod set;
pub mod store;

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use chrono::Utc;
use deadpool_postgres::{GenericClient, Pool};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use self::{
    metrics::{DepartmentFigures, Paired, Prediction, Scored, UrgentFigures},
    set::{LabelledSet, Row, Split},
};
use super::{reprocess, Operator};
use crate::{
    db,
    domain::{error::Result, key::IdempotencyKey, versions::VersionPair},
    evaluate::Policy,
    pipeline::{ingest, outbox::Work},
};

/// Rows per statement when tickets and jobs are written.
const WRITE_BATCH: usize = 500;
/// How often a waiting run looks at its jobs.
pub const POLL: Duration = Duration::from_millis(250);
/// How many misclassified rows a run keeps (for the Quality page).
const MISSES_KEPT: usize = 200;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct Plan {
    pub set: LabelledSet,
    pub split: Option<Split>,
    /// The first is the baseline of the paired comparisons.
    pub versions: Vec<VersionPair>,
    pub policy: Policy,
}

/// How the caller follows a run: whether to wait for every answer, when to stop waiting,
/// and what to tell on the way. The ops Lambda does not wait (the fleet answers; a later run
/// reports); the CLI waits with a progress bar.
#[derive(Clone, Default)]
pub struct Watch {
    pub wait: bool,
    pub stop: CancellationToken,
    pub progress: Option<Tell>,
}

/// What a waiting run calls with its progress.
pub type Tell = Arc<dyn Fn(&Progress) + Send + Sync>;

/// How far the run's jobs are, over every version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub answered: u64,
    pub dead: u64,
    /// Distinct content keys (duplicate rows share one).
    pub total: u64,
}

impl Progress {
    pub fn finished(&self) -> bool {
        self.answered + self.dead >= self.total
    }
}

/// `triage eval`'s report; SPEC fixes `set`, `runs` and their fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub set: SetInfo,
    /// Every job answered or dead: the runs are stored. Otherwise the figures count the
    /// missing answers as wrong and nothing is stored; run again to continue.
    pub complete: bool,
    pub runs: Vec<RunFigures>,
    /// Each version against the first, on the same rows.
    pub comparison: Vec<Comparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetInfo {
    pub digest: String,
    /// Rows evaluated (of the split, when one was given).
    pub rows: usize,
    pub split: Option<Split>,
}

/// One version's figures over the set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    /// `prompt/model@effort`.
    pub version: String,
    pub n: usize,
    /// Rows with an answer.
    pub answered: usize,
    /// Provider calls this run made (0 when every answer was stored already), their tokens
    /// and cost.
    pub calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    /// What the answers cost when they were made, per row.
    pub cost_per_ticket_usd: f64,
    pub contract_violations: i64,
    pub dead_letters: i64,
    /// Time per answered call, milliseconds.
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    pub department: DepartmentFigures,
    pub urgent: UrgentFigures,
    /// Rows answered wrongly (department or urgency), the first [`MISSES_KEPT`].
    pub misclassified: Vec<Miss>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Miss {
    pub id: String,
    pub ticket_id: Uuid,
    pub department: String,
    pub predicted: Option<String>,
    pub is_urgent: bool,
    pub predicted_urgent: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline: String,
    pub other: String,
    #[serde(flatten)]
    pub paired: Paired,
}

/// The ticket a labelled row becomes: the same row always the same ticket, so a rerun
/// writes none. A UUID (version 4 bits) from SHA-256 of the row's id and text.
pub fn ticket_id(row: &Row) -> Uuid {
    let mut hasher = Sha256::new();
    for part in ["triage-eval", &row.id, &row.subject, &row.message] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}

fn key(row: &Row, version: &VersionPair) -> String {
    IdempotencyKey::derive(
        &row.subject,
        &row.message,
        version.prompt_version.as_str(),
        version.model_version.as_str(),
    )
    .to_string()
}

pub async fn run(pool: &Pool, plan: &Plan, operator: &Operator, watch: &Watch) -> Result<Report> {
    let started_at = Utc::now();
    let rows = plan.set.rows_of(plan.split);
    let ids: Vec<Uuid> = rows.iter().map(|r| ticket_id(r)).collect();
    let keys: Vec<Vec<String>> = plan
        .versions
        .iter()
        .map(|v| rows.iter().map(|r| key(r, v)).collect())
        .collect();
    queue(pool, &rows, &ids, plan, &keys).await?;
    let all_keys: Vec<String> = keys
        .iter()
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut progress = progress_of(pool, &all_keys).await?;
    while watch.wait && !progress.finished() && !watch.stop.is_cancelled() {
        if let Some(tell) = &watch.progress {
            tell(&progress);
        }
        tokio::select! {
            _ = watch.stop.cancelled() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
        progress = progress_of(pool, &all_keys).await?;
    }
    if let Some(tell) = &watch.progress {
        tell(&progress);
    }
    let client = db::client(pool).await?;
    let mut runs = Vec::new();
    let mut scored = Vec::new();
    for (version, keys) in plan.versions.iter().zip(&keys) {
        let (figures, rows_scored) = score(
            &client,
            version,
            &rows,
            &ids,
            keys,
            &plan.policy,
            started_at,
        )
        .await?;
        runs.push(figures);
        scored.push(rows_scored);
    }
    let complete = progress.finished();
    if complete {
        for (version, figures) in plan.versions.iter().zip(&runs) {
            let run = store::NewRun {
                set_digest: &plan.set.digest,
                split: plan.split,
                version,
                policy_version: &plan.policy.version,
                figures,
                started_at,
                operator: operator.as_str(),
            };
            store::insert(&client, &run).await?;
        }
    }
    let comparison = runs
        .iter()
        .zip(&scored)
        .skip(1)
        .map(|(other, rows)| Comparison {
            baseline: runs[0].version.clone(),
            other: other.version.clone(),
            paired: metrics::paired(&scored[0], rows),
        })
        .collect();
    tracing::info!(
        complete,
        versions = runs.len(),
        rows = rows.len(),
        "eval run"
    );
    Ok(Report {
        set: SetInfo {
            digest: plan.set.digest.clone(),
            rows: rows.len(),
            split: plan.split,
        },
        complete,
        runs,
        comparison,
    })
}

/// The tickets (once) and each version's links and jobs, as bulk eval work claimable now.
async fn queue(
    pool: &Pool,
    rows: &[&Row],
    ids: &[Uuid],
    plan: &Plan,
    keys: &[Vec<String>],
) -> Result<()> {
    let client = db::client(pool).await?;
    for start in (0..rows.len()).step_by(WRITE_BATCH) {
        let end = (start + WRITE_BATCH).min(rows.len());
        let chunk = &rows[start..end];
        let subjects: Vec<&str> = chunk.iter().map(|r| r.subject.as_str()).collect();
        let messages: Vec<&str> = chunk.iter().map(|r| r.message.as_str()).collect();
        ingest::insert_eval_tickets(&client, &ids[start..end], &subjects, &messages).await?;
        for (version, keys) in plan.versions.iter().zip(keys) {
            let batch = reprocess::Batch {
                ticket_ids: &ids[start..end],
                keys: &keys[start..end],
                versions: version,
                spread: Duration::ZERO,
                work: Work::EVAL,
            };
            reprocess::enqueue(&client, &batch, false).await?;
        }
    }
    Ok(())
}

const PROGRESS: &str = r#"
SELECT count(*) FILTER (WHERE r.idempotency_key IS NOT NULL),
       count(*) FILTER (WHERE r.idempotency_key IS NULL AND o.status = 'dead')
FROM unnest($1::text[]) AS k (key)
LEFT JOIN evaluation_result r ON r.idempotency_key = k.key
LEFT JOIN evaluation_outbox o ON o.idempotency_key = k.key
"#;

async fn progress_of(pool: &Pool, keys: &[String]) -> Result<Progress> {
    let client = db::client(pool).await?;
    let row = client.query_one(PROGRESS, &[&keys]).await?;
    Ok(Progress {
        answered: row.get::<_, i64>(0) as u64,
        dead: row.get::<_, i64>(1) as u64,
        total: keys.len() as u64,
    })
}

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

async fn score(
    client: &impl GenericClient,
    version: &VersionPair,
    rows: &[&Row],
    ids: &[Uuid],
    keys: &[String],
    policy: &Policy,
    started_at: chrono::DateTime<Utc>,
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
    let threshold = policy.urgent_threshold;
    let misclassified = rows
        .iter()
        .zip(ids)
        .zip(&scored)
        .filter(|(_, s)| {
            s.predicted.as_ref().is_none_or(|p| {
                p.department != s.department || (p.is_urgent >= threshold) != s.is_urgent
            })
        })
        .take(MISSES_KEPT)
        .map(|((row, id), s)| Miss {
            id: row.id.clone(),
            ticket_id: *id,
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
