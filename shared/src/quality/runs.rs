//! `eval_run`: what each finished run concluded. One statement per purpose.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use super::{gate::Figures, metrics::FamilyTable, set::Split, RunFigures};
use crate::domain::{error::Result, versions::VersionPair};

/// A stored run, as `triage eval --list` and the Quality page show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredRun {
    pub id: i64,
    pub set_digest: String,
    pub split: Option<String>,
    #[serde(flatten)]
    pub version: VersionPair,
    pub n: i32,
    pub calls: i32,
    pub cost_usd: f64,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub operator: String,
    pub figures: RunFigures,
}

pub(super) struct NewRun<'a> {
    pub set_digest: &'a str,
    pub split: Option<Split>,
    pub version: &'a VersionPair,
    pub policy_version: &'a str,
    pub figures: &'a RunFigures,
    /// The run's offline baseline ([`super::score::baseline`]), kept beside its figures
    /// (`metrics.baseline`, without its rows) for the Quality page.
    pub baseline: Option<&'a RunFigures>,
    pub started_at: DateTime<Utc>,
    pub operator: &'a str,
}

pub(super) async fn insert(client: &impl GenericClient, run: &NewRun<'_>) -> Result<i64> {
    let mut metrics = serde_json::to_value(run.figures).unwrap_or_default();
    if let (Some(baseline), Some(object)) = (run.baseline, metrics.as_object_mut()) {
        let mut baseline = baseline.clone();
        baseline.misclassified.clear();
        baseline.by_family.clear();
        object.insert(
            "baseline".into(),
            serde_json::to_value(baseline).unwrap_or_default(),
        );
    }
    let row = client
        .query_one(
            r#"
            INSERT INTO eval_run (set_digest, split, prompt_version, model_version, policy_version,
                                  n, metrics, calls, cost_usd, started_at, operator)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::float8::numeric, $10, $11)
            RETURNING id
            "#,
            &[
                &run.set_digest,
                &run.split.map(Split::as_str),
                &run.version.prompt_version,
                &run.version.model_version,
                &run.policy_version,
                &(run.figures.n as i32),
                &metrics,
                &(run.figures.calls as i32),
                &run.figures.cost_usd,
                &run.started_at,
                &run.operator,
            ],
        )
        .await?;
    Ok(row.get(0))
}

const COLUMNS: &str = "id, set_digest, split, prompt_version, model_version, n, calls, \
                       cost_usd::float8, started_at, finished_at, operator, metrics";

fn stored(row: &tokio_postgres::Row) -> Option<StoredRun> {
    Some(StoredRun {
        id: row.get(0),
        set_digest: row.get(1),
        split: row.get(2),
        version: VersionPair {
            prompt_version: row.get(3),
            model_version: row.get(4),
        },
        n: row.get(5),
        calls: row.get(6),
        cost_usd: row.get(7),
        started_at: row.get(8),
        finished_at: row.get(9),
        operator: row.get(10),
        // A row an older build wrote in another shape is left out rather than misread.
        figures: serde_json::from_value(row.get(11)).ok()?,
    })
}

/// The newest runs, newest first.
pub async fn list(client: &impl GenericClient, limit: i64) -> Result<Vec<StoredRun>> {
    let sql = format!("SELECT {COLUMNS} FROM eval_run ORDER BY finished_at DESC, id DESC LIMIT $1");
    Ok(client
        .query(&sql, &[&limit])
        .await?
        .iter()
        .filter_map(stored)
        .collect())
}

/// The newest run of each version on `set_digest`'s `split`, best macro-F1 first.
pub async fn newest_per_version(
    client: &impl GenericClient,
    set_digest: &str,
    split: Split,
) -> Result<Vec<StoredRun>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM (
             SELECT DISTINCT ON (prompt_version, model_version) *
             FROM eval_run WHERE set_digest = $1 AND split = $2
             ORDER BY prompt_version, model_version, finished_at DESC, id DESC
         ) newest
         ORDER BY (metrics -> 'department' ->> 'macro_f1')::float8 DESC, prompt_version, model_version"
    );
    Ok(client
        .query(&sql, &[&set_digest, &split.as_str()])
        .await?
        .iter()
        .filter_map(stored)
        .collect())
}

/// The gated figures of `version`'s newest run on `set_digest`'s test split, with its
/// families' counts when it was stored with them (for the paired test).
pub async fn gate_figures(
    client: &impl GenericClient,
    set_digest: &str,
    version: &VersionPair,
    policy: &str,
) -> Result<Option<Figures>> {
    let row = client
        .query_opt(
            r#"
            SELECT (metrics -> 'department' ->> 'macro_f1')::float8,
                   (metrics -> 'urgent' ->> 'recall')::float8,
                   metrics -> 'by_family'
            FROM eval_run
            WHERE set_digest = $1 AND split = 'test' AND prompt_version = $2 AND model_version = $3
              AND policy_version = $4
            ORDER BY finished_at DESC, id DESC
            LIMIT 1
            "#,
            &[
                &set_digest,
                &version.prompt_version,
                &version.model_version,
                &policy,
            ],
        )
        .await?;
    Ok(row.map(|row| Figures {
        macro_f1: row.get(0),
        urgent_recall: row.get(1),
        // Absent in runs stored before it (or unreadable): the gate goes unpaired and says so.
        by_family: row
            .get::<_, Option<serde_json::Value>>(2)
            .and_then(|v| serde_json::from_value::<FamilyTable>(v).ok())
            .filter(|t| !t.is_empty()),
    }))
}

/// The offline baseline of the newest run on `set_digest`'s `split` stored with one (the rules
/// classifier is deterministic, so any run of the set and split gives the same figures).
pub async fn baseline(
    client: &impl GenericClient,
    set_digest: &str,
    split: Split,
) -> Result<Option<RunFigures>> {
    let row = client
        .query_opt(
            r#"
            SELECT metrics -> 'baseline' FROM eval_run
            WHERE set_digest = $1 AND split = $2 AND metrics ? 'baseline'
            ORDER BY finished_at DESC, id DESC
            LIMIT 1
            "#,
            &[&set_digest, &split.as_str()],
        )
        .await?;
    Ok(row.and_then(|row| serde_json::from_value(row.get(0)).ok()))
}

/// The text of a run's tickets, for the offline baseline to answer: eval tickets, and the
/// production tickets of `--set feedback`, which are evaluated in place. Never shown: the
/// Quality page reads [`eval_ticket_texts`].
pub async fn run_ticket_texts(
    client: &impl GenericClient,
    ids: &[uuid::Uuid],
) -> Result<std::collections::HashMap<uuid::Uuid, (String, String)>> {
    Ok(client
        .query(
            "SELECT id, subject, message FROM ticket WHERE id = ANY($1)",
            &[&ids],
        )
        .await?
        .into_iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2))))
        .collect())
}

/// The text of eval tickets (`workload = 'eval'` only: no production ticket's text can be read
/// through this), for the Quality page's misclassified rows.
pub async fn eval_ticket_texts(
    client: &impl GenericClient,
    ids: &[uuid::Uuid],
) -> Result<std::collections::HashMap<uuid::Uuid, (String, String)>> {
    Ok(client
        .query(
            "SELECT id, subject, message FROM ticket WHERE id = ANY($1) AND workload = 'eval'",
            &[&ids],
        )
        .await?
        .into_iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2))))
        .collect())
}
