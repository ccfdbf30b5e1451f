//! `triage eval` (docs/quality.md): how right each version is on a labelled set, measured
//! *through the pipeline*. The set's rows become tickets and jobs marked as eval work
//! (`workload = 'eval'`, bulk lane), so the content key, the ledger's dedup, the shared rate
//! limit and the daily budget all apply (a second run of a version over a set makes no call),
//! while no production report counts them. Workers answer the jobs as any other (the deployed
//! fleet for the ops Lambda, whose request returns at once); this module queues them, records
//! the run as pending ([`pending`]), waits for the answers when asked to, and scores them
//! against the labels ([`score`], [`metrics`]). A complete run is concluded once, by whoever
//! finds it complete (the waiting CLI, the sweeper's tick, `--list`): stored in `eval_run`
//! ([`runs`]), which the promote gate ([`gate`]) reads.
//!
//! Stopping (Ctrl-C) leaves only queued jobs, stored answers and the pending run: the
//! sweeper concludes it once the workers are done, and a rerun queues nothing new.

pub mod by_time;
pub mod gate;
pub mod live;
pub mod metrics;
pub mod pending;
pub mod preview;
pub mod runs;
mod score;
pub mod set;
pub mod source;
pub mod thresholds;
mod under_way;
pub mod view;

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use under_way::{tend, under_way, Listing, Running};

use self::{
    metrics::{DepartmentFigures, FamilyTable, Paired, UrgentFigures},
    pending::{Labelled, Pending},
    set::{LabelledSet, Row, Split},
    source::SetSource,
};
use crate::{
    db,
    domain::{
        error::{InvalidRequest, Result},
        key::IdempotencyKey,
        versions::{ModelVersion, VersionPair},
    },
    pipeline::{
        ingest,
        outbox::{requeue, Lane, Work},
    },
    providers::Policy,
};

/// Rows per statement when tickets and jobs are written.
const WRITE_BATCH: usize = 500;
/// How often a waiting run looks at its jobs.
pub const POLL: Duration = Duration::from_millis(250);
/// How many misclassified rows a run keeps (for the Quality page).
pub(super) const MISSES_KEPT: usize = 200;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct Plan {
    pub source: SetSource,
    pub set: LabelledSet,
    pub split: Option<Split>,
    /// The first is the baseline of the paired comparisons.
    pub versions: Vec<VersionPair>,
    pub policy: Policy,
    /// The jobs' lane: bulk (behind new tickets, `TRIAGE_BULK_TIER`: a batch tier may take up
    /// to 24 h) or interactive (online, answered in minutes).
    pub lane: Lane,
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
    /// The run's id: `triage eval --list` shows its progress until it is concluded.
    pub run_id: Uuid,
    pub set: SetInfo,
    /// Every job answered or dead: the runs are stored. Otherwise the figures count the
    /// missing answers as wrong and nothing is stored; run again to continue.
    pub complete: bool,
    pub progress: Progress,
    pub runs: Vec<RunFigures>,
    /// Each version against the first, on the same rows.
    pub comparison: Vec<Comparison>,
    /// The offline rules classifier over the same rows, answered in this process (no job, no
    /// call, no ledger): the floor every version is read against. `None` when a version asked
    /// for is `rules@offline` already.
    pub baseline: Option<RunFigures>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetInfo {
    pub digest: String,
    /// `shipped`, `s3://BUCKET/KEY` or a path.
    pub source: String,
    /// Rows evaluated (of the split, when one was given).
    pub rows: usize,
    pub split: Option<Split>,
}

/// One version's figures over the set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    /// `prompt/model@effort`.
    pub version: String,
    /// Rows.
    pub n: usize,
    /// Scenario families among the rows (the intervals' unit); 0 in runs stored before it.
    #[serde(default)]
    pub families: usize,
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
    /// What the answers cost over the rows whose department is right: the price of one
    /// correct triage. `None` when no row is right (and in runs stored before it).
    #[serde(default)]
    pub cost_per_correct_usd: Option<f64>,
    /// Share of the rows a cascade's local classifier answered (`answered_by = 'local'`, no
    /// call); 0 for a version that is no cascade (and in runs stored before it).
    #[serde(default)]
    pub local_share: f64,
    pub contract_violations: i64,
    pub dead_letters: i64,
    /// Time per answered call, milliseconds.
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    pub department: DepartmentFigures,
    pub urgent: UrgentFigures,
    /// Rows answered wrongly (department or urgency), the first [`MISSES_KEPT`].
    pub misclassified: Vec<Miss>,
    /// Each family's counts, for the promote gate's paired test; empty in runs stored before
    /// it (the gate then compares the figures alone, and says so).
    #[serde(default, skip_serializing_if = "FamilyTable::is_empty")]
    pub by_family: FamilyTable,
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

fn key(row: &Row, version: &VersionPair, policy: &Policy) -> String {
    IdempotencyKey::derive_under(
        &row.subject,
        &row.message,
        version.prompt_version.as_str(),
        version.model_version.as_str(),
        &policy.version,
    )
    .to_string()
}

/// Queues the plan's jobs and records the run ([`pending`]); then, when `watch` says so,
/// waits for the answers. Concluded when complete (see [`conclude`]); the report says how far
/// it is, and carries the run's id either way.
pub async fn run(pool: &Pool, plan: &Plan, operator: &str, watch: &Watch) -> Result<Report> {
    let pending = start(pool, plan, operator).await?;
    let progress = follow(pool, &pending, watch).await?;
    conclude(pool, &pending, progress).await
}

/// How far `pending`'s jobs are; when `watch` says so, after waiting for every answer (or
/// until told to stop), telling the progress on the way.
async fn follow(pool: &Pool, pending: &Pending, watch: &Watch) -> Result<Progress> {
    let keys = pending.all_keys();
    let mut progress = progress_of(pool, &keys).await?;
    while watch.wait && !progress.finished() && !watch.stop.is_cancelled() {
        if let Some(tell) = &watch.progress {
            tell(&progress);
        }
        tokio::select! {
            _ = watch.stop.cancelled() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
        progress = progress_of(pool, &keys).await?;
    }
    if let Some(tell) = &watch.progress {
        tell(&progress);
    }
    Ok(progress)
}

async fn start(pool: &Pool, plan: &Plan, operator: &str) -> Result<Pending> {
    let rows = plan.set.rows_of(plan.split);
    // The desk's tickets are evaluated in place; a labelled row becomes an eval ticket.
    let ids: Vec<Uuid> = rows
        .iter()
        .map(|r| r.ticket.unwrap_or_else(|| ticket_id(r)))
        .collect();
    let keys: Vec<Vec<String>> = plan
        .versions
        .iter()
        .map(|v| rows.iter().map(|r| key(r, v, &plan.policy)).collect())
        .collect();
    let mut pending = Pending {
        id: Uuid::nil(),
        set_digest: plan.set.digest.clone(),
        set_source: plan.source.to_string(),
        split: plan.split,
        policy_version: plan.policy.version.clone(),
        versions: plan.versions.clone(),
        rows: rows
            .iter()
            .zip(&ids)
            .map(|(row, id)| Labelled {
                id: row.id.clone(),
                family: row.family().to_string(),
                ticket_id: *id,
                department: row.department.clone(),
                is_urgent: row.is_urgent,
            })
            .collect(),
        keys,
        operator: operator.to_string(),
        started_at: Utc::now(),
    };
    // Recorded before its jobs exist: a worker may call for one at once, and the run's calls
    // are the ledger's rows since its start. (A run whose queueing fails stays pending; the
    // same request again continues it.)
    let client = db::client(pool).await?;
    (pending.id, pending.started_at) = pending::record(&client, &pending).await?;
    drop(client);
    let keys = &pending.keys;
    queue(pool, &rows, &ids, plan, keys).await?;
    Ok(pending)
}

/// The run's figures as they stand. Complete (every job answered or dead), they are stored and
/// the run concluded, once, whoever gets there first: a waiting CLI, the sweeper's tick or a
/// listing; incomplete, nothing is stored and the missing answers count as wrong.
pub async fn conclude(pool: &Pool, pending: &Pending, progress: Progress) -> Result<Report> {
    let mut client = db::client(pool).await?;
    let policy = crate::pipeline::taxonomy::policy(&client, &pending.policy_version)
        .await?
        .map_err(|unusable| InvalidRequest::new("policy", unusable.to_string()))?;
    let mut runs = Vec::new();
    let mut scored = Vec::new();
    for (version, keys) in pending.versions.iter().zip(&pending.keys) {
        let threshold = policy.urgent_threshold;
        let (figures, rows_scored) = score::score(
            &client,
            version,
            &pending.rows,
            keys,
            threshold,
            pending.started_at,
        )
        .await?;
        runs.push(figures);
        scored.push(rows_scored);
    }
    // The offline floor, unless a version asked for is the rules classifier itself.
    let asked_for_rules = pending
        .versions
        .iter()
        .any(|v| v.model_version.as_str() == ModelVersion::RULES);
    // The rules know only the built-in desk: a taxonomy of a desk's own has no offline floor.
    let baseline = if asked_for_rules || policy.taxonomy.is_some() {
        None
    } else {
        Some(score::baseline(&client, &pending.rows, &policy).await?.0)
    };
    let complete = progress.finished();
    if complete {
        let transaction = client.transaction().await?;
        if pending::conclude(&transaction, pending.id).await? {
            for (version, figures) in pending.versions.iter().zip(&runs) {
                let run = runs::NewRun {
                    set_digest: &pending.set_digest,
                    split: pending.split,
                    version,
                    policy_version: &pending.policy_version,
                    figures,
                    baseline: baseline.as_ref(),
                    started_at: pending.started_at,
                    operator: &pending.operator,
                };
                runs::insert(&transaction, &run).await?;
            }
        }
        transaction.commit().await?;
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
        rows = pending.rows.len(),
        "eval run"
    );
    Ok(Report {
        run_id: pending.id,
        set: SetInfo {
            digest: pending.set_digest.clone(),
            source: pending.set_source.clone(),
            rows: pending.rows.len(),
            split: pending.split,
        },
        complete,
        progress,
        runs,
        comparison,
        baseline,
    })
}

/// The tickets (once) and each version's links and jobs, as eval work in the plan's lane,
/// claimable now.
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
        let copies: Vec<(&Uuid, &&Row)> = ids[start..end]
            .iter()
            .zip(&rows[start..end])
            .filter(|(_, row)| row.ticket.is_none())
            .collect();
        let copy_ids: Vec<Uuid> = copies.iter().map(|(id, _)| **id).collect();
        let subjects: Vec<&str> = copies.iter().map(|(_, r)| r.subject.as_str()).collect();
        let messages: Vec<&str> = copies.iter().map(|(_, r)| r.message.as_str()).collect();
        ingest::insert_eval_tickets(&client, &copy_ids, &subjects, &messages).await?;
        for (version, keys) in plan.versions.iter().zip(keys) {
            let batch = requeue::Batch {
                ticket_ids: &ids[start..end],
                keys: &keys[start..end],
                versions: version,
                policy: &plan.policy.version,
                spread: Duration::ZERO,
                work: Work {
                    lane: plan.lane,
                    ..Work::EVAL
                },
            };
            requeue::enqueue(&client, &batch, false).await?;
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

pub(super) async fn progress_of(pool: &Pool, keys: &[String]) -> Result<Progress> {
    let client = db::client(pool).await?;
    let row = client.query_one(PROGRESS, &[&keys]).await?;
    Ok(Progress {
        answered: row.get::<_, i64>(0) as u64,
        dead: row.get::<_, i64>(1) as u64,
        total: keys.len() as u64,
    })
}
