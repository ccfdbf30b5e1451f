//! A cascade that stops itself (docs/cascade.md, "Suspension"): when its audited precision's
//! upper bound falls below its target (`quality::live` decides, on the sweeper's tick), the
//! cascade is suspended (`cascade_suspension`, V39): its classifier answers nothing locally
//! and every new job goes to the large model, under the same keys, so nothing is lost or
//! billed twice. It ends with `triage cascade resume` (audited), or when a retrain switches
//! to another classifier, which is another cascade version. The worker reads what is
//! suspended once per invocation.

use std::{collections::HashSet, sync::RwLock};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::domain::error::Result;

/// One suspension, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suspension {
    pub model_version: String,
    pub reason: String,
    pub audited: u64,
    pub correct: u64,
    pub upper_bound: f64,
    pub target: f64,
}

const OPEN: &str = "SELECT model_version FROM cascade_suspension WHERE resumed_at IS NULL";

const CURRENT: &str = "SELECT reason, suspended_at FROM cascade_suspension \
                       WHERE model_version = $1 AND resumed_at IS NULL";

const LAST_RESUMED: &str =
    "SELECT max(resumed_at) FROM cascade_suspension WHERE model_version = $1";

const SUSPEND: &str = "INSERT INTO cascade_suspension \
    (model_version, reason, audited, correct, upper_bound, target) \
    VALUES ($1, $2, $3, $4, $5, $6) \
    ON CONFLICT (model_version) WHERE resumed_at IS NULL DO NOTHING";

const RESUME: &str = "UPDATE cascade_suspension \
    SET resumed_at = now(), resumed_by = $2, resume_reason = $3, forced = $4 \
    WHERE model_version = $1 AND resumed_at IS NULL RETURNING reason";

/// Records `suspension`; false when the cascade was suspended already.
pub async fn suspend(client: &impl GenericClient, suspension: &Suspension) -> Result<bool> {
    let s = suspension;
    let rows = client
        .execute(
            SUSPEND,
            &[
                &s.model_version,
                &s.reason,
                &(s.audited as i64),
                &(s.correct as i64),
                &s.upper_bound,
                &s.target,
            ],
        )
        .await?;
    Ok(rows == 1)
}

/// Why `model_version` is suspended and since when; `None` when it is not.
pub async fn current(
    client: &impl GenericClient,
    model_version: &str,
) -> Result<Option<(String, DateTime<Utc>)>> {
    let row = client.query_opt(CURRENT, &[&model_version]).await?;
    Ok(row.map(|row| (row.get(0), row.get(1))))
}

/// When `model_version` was last resumed: audits before it judged the suspension that ended.
pub async fn last_resumed(
    client: &impl GenericClient,
    model_version: &str,
) -> Result<Option<DateTime<Utc>>> {
    Ok(client
        .query_one(LAST_RESUMED, &[&model_version])
        .await?
        .get(0))
}

/// Ends `model_version`'s suspension; the reason it was suspended for, `None` when it was not.
pub async fn resume(
    client: &impl GenericClient,
    model_version: &str,
    (by, reason): (&str, &str),
    forced: bool,
) -> Result<Option<String>> {
    let row = client
        .query_opt(RESUME, &[&model_version, &by, &reason, &forced])
        .await?;
    Ok(row.map(|row| row.get(0)))
}

/// The cascades suspended, as one process last read them.
#[derive(Debug, Default)]
pub struct Suspended(RwLock<HashSet<String>>);

impl Suspended {
    /// Reads what is suspended now (once per worker invocation).
    pub async fn refresh(&self, client: &impl GenericClient) -> Result<()> {
        let rows = client.query(OPEN, &[]).await?;
        let open = rows.iter().map(|row| row.get(0)).collect();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = open;
        Ok(())
    }

    pub fn holds(&self, model_version: &str) -> bool {
        let open = self.0.read().unwrap_or_else(|e| e.into_inner());
        open.contains(model_version)
    }
}
