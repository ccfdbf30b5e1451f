//! `eval_request`: a run asked for and not yet concluded, with what scoring it needs (each
//! row's id, ticket and labels; each version's content keys), so that whoever finds its jobs
//! all answered concludes it: the waiting CLI, the sweeper's tick or `triage eval --list`.
//! One statement per purpose.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::set::Split;
use crate::domain::{
    error::Result,
    versions::{ModelVersion, VersionPair},
};

/// One labelled row, as scoring needs it (no text: that stays in `ticket`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Labelled {
    pub id: String,
    /// Its scenario family (the unit of the intervals' bootstrap).
    #[serde(default)]
    pub family: String,
    pub ticket_id: Uuid,
    pub department: String,
    pub is_urgent: bool,
}

/// A run not yet concluded.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub id: Uuid,
    pub set_digest: String,
    /// Where the set was read from (`shipped`, `s3://…`, a path), for people.
    pub set_source: String,
    pub split: Option<Split>,
    pub policy_version: String,
    /// The first is the baseline of the paired comparisons.
    pub versions: Vec<VersionPair>,
    pub rows: Vec<Labelled>,
    /// Per version, each row's content key.
    pub keys: Vec<Vec<String>>,
    pub operator: String,
    pub started_at: DateTime<Utc>,
}

/// `plan`'s shape.
#[derive(Serialize, Deserialize)]
struct Plan {
    /// `prompt`, `model@effort` per version.
    versions: Vec<(String, String)>,
    rows: Vec<Labelled>,
    keys: Vec<Vec<String>>,
}

impl Pending {
    /// Every content key of the run, each once (duplicate rows and versions share keys).
    pub fn all_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.keys.iter().flatten().cloned().collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// Records `pending` (its `id` and `started_at` are the database's); the same run asked for
/// again while it is under way (same set, split and versions: a rerun after Ctrl-C) is that
/// run, continued, not a second one.
pub async fn record(
    client: &impl GenericClient,
    pending: &Pending,
) -> Result<(Uuid, DateTime<Utc>)> {
    let plan = Plan {
        versions: pending
            .versions
            .iter()
            .map(|v| {
                (
                    v.prompt_version.as_str().into(),
                    v.model_version.as_str().into(),
                )
            })
            .collect(),
        rows: pending.rows.clone(),
        keys: pending.keys.clone(),
    };
    let row = client
        .query_one(
            r#"
            WITH same AS (
                SELECT id, started_at FROM eval_request
                WHERE concluded_at IS NULL AND set_digest = $1 AND split IS NOT DISTINCT FROM $3
                  AND policy_version = $4 AND plan -> 'versions' = $5::jsonb -> 'versions'
                ORDER BY started_at LIMIT 1
            ), new AS (
                INSERT INTO eval_request (set_digest, set_source, split, policy_version, plan, operator)
                SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM same)
                RETURNING id, started_at
            )
            SELECT id, started_at FROM same UNION ALL SELECT id, started_at FROM new
            "#,
            &[
                &pending.set_digest,
                &pending.set_source,
                &pending.split.map(Split::as_str),
                &pending.policy_version,
                &serde_json::to_value(&plan).unwrap_or_default(),
                &pending.operator,
            ],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// Every run not yet concluded, oldest first.
pub async fn running(client: &impl GenericClient) -> Result<Vec<Pending>> {
    let rows = client
        .query(
            "SELECT id, set_digest, set_source, split, policy_version, plan, operator, started_at \
             FROM eval_request WHERE concluded_at IS NULL ORDER BY started_at",
            &[],
        )
        .await?;
    // A plan an older build wrote in another shape is left out rather than misread.
    Ok(rows.iter().filter_map(pending).collect())
}

fn pending(row: &tokio_postgres::Row) -> Option<Pending> {
    let plan: Plan = serde_json::from_value(row.get(5)).ok()?;
    let versions = plan
        .versions
        .iter()
        .map(|(prompt, model)| {
            Some(VersionPair {
                prompt_version: prompt.parse().ok()?,
                model_version: ModelVersion::from_stored(model),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Pending {
        id: row.get(0),
        set_digest: row.get(1),
        set_source: row.get(2),
        split: row.get::<_, Option<&str>>(3).and_then(|s| s.parse().ok()),
        policy_version: row.get(4),
        versions,
        rows: plan.rows,
        keys: plan.keys,
        operator: row.get(6),
        started_at: row.get(7),
    })
}

/// Marks the run concluded; `false` when another caller concluded it first (and stored its
/// figures: they must not be stored twice).
pub async fn conclude(client: &impl GenericClient, id: Uuid) -> Result<bool> {
    let concluded = client
        .execute(
            "UPDATE eval_request SET concluded_at = now() WHERE id = $1 AND concluded_at IS NULL",
            &[&id],
        )
        .await?;
    Ok(concluded == 1)
}
