//! `threshold_sweep` (V26): each sweep's points, kept for the Quality page, which draws the
//! newest of each cascade.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use super::Point;
use crate::{
    domain::{error::Result, versions::VersionPair},
    quality::set::Split,
};

/// A stored sweep, as the Quality page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredSweep {
    pub id: i64,
    /// The cascade swept.
    #[serde(flatten)]
    pub version: VersionPair,
    pub set_digest: String,
    pub split: String,
    pub points: Vec<Point>,
    pub run_by: String,
    pub created_at: DateTime<Utc>,
}

pub(super) struct NewSweep<'a> {
    pub version: &'a VersionPair,
    pub set_digest: &'a str,
    pub split: Split,
    pub points: &'a [Point],
    pub run_by: &'a str,
}

pub(super) async fn insert(client: &impl GenericClient, sweep: &NewSweep<'_>) -> Result<i64> {
    let points = serde_json::to_value(sweep.points).unwrap_or_default();
    let row = client
        .query_one(
            "INSERT INTO threshold_sweep (prompt_version, model_version, set_digest, split, \
                                          points, run_by)
             VALUES ($1, $2, $3, $4, $5, $6)
             RETURNING id",
            &[
                &sweep.version.prompt_version,
                &sweep.version.model_version,
                &sweep.set_digest,
                &sweep.split.as_str(),
                &points,
                &sweep.run_by,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// The newest sweep of each cascade on `set_digest`, newest first.
pub async fn newest_per_cascade(
    client: &impl GenericClient,
    set_digest: &str,
) -> Result<Vec<StoredSweep>> {
    let rows = client
        .query(
            "SELECT id, prompt_version, model_version, set_digest, split, points, run_by,
                    created_at
             FROM (
                 SELECT DISTINCT ON (prompt_version, model_version) *
                 FROM threshold_sweep WHERE set_digest = $1
                 ORDER BY prompt_version, model_version, created_at DESC, id DESC
             ) newest
             ORDER BY created_at DESC, id DESC",
            &[&set_digest],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            Some(StoredSweep {
                id: row.get(0),
                version: VersionPair {
                    prompt_version: row.get(1),
                    model_version: row.get(2),
                },
                set_digest: row.get(3),
                split: row.get(4),
                // A row an older build wrote in another shape is left out rather than misread.
                points: serde_json::from_value(row.get(5)).ok()?,
                run_by: row.get(6),
                created_at: row.get(7),
            })
        })
        .collect())
}
