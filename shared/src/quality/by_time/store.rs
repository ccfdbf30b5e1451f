//! `time_split_run` (V37): each time split's report, kept for the Quality page, which leads
//! with the newest.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use super::Report;
use crate::domain::error::Result;

/// A stored time split, as the Quality page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredTimeSplit {
    pub id: i64,
    pub report: Report,
    pub run_by: String,
    pub created_at: DateTime<Utc>,
}

pub(super) async fn insert(client: &impl GenericClient, report: &Report, by: &str) -> Result<i64> {
    let stored = serde_json::to_value(report).unwrap_or_default();
    let row = client
        .query_one(
            "INSERT INTO time_split_run (split_at, until, prompt_version, model_version,
                                         policy_version, report, run_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             RETURNING id",
            &[
                &report.at,
                &report.until,
                &report.prompt_version,
                &report.model_version,
                &report.policy_version,
                &stored,
                &by,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// The newest time split under `policy_version`, if any.
pub async fn newest(
    client: &impl GenericClient,
    policy_version: &str,
) -> Result<Option<StoredTimeSplit>> {
    let row = client
        .query_opt(
            "SELECT id, report, run_by, created_at FROM time_split_run
             WHERE policy_version = $1
             ORDER BY created_at DESC, id DESC LIMIT 1",
            &[&policy_version],
        )
        .await?;
    // A row an older build wrote in another shape is left out rather than misread.
    Ok(row.and_then(|row| {
        Some(StoredTimeSplit {
            id: row.get(0),
            report: serde_json::from_value(row.get(1)).ok()?,
            run_by: row.get(2),
            created_at: row.get(3),
        })
    }))
}
