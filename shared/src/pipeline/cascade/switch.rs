//! The cascade kept fresh (docs/cascade.md, "Kept fresh"): a configured cascade answers new
//! tickets with the classifier switched to last (`cascade_switch`, V38), so a retrain that
//! passes its gate takes effect without a deploy. Keys stay derived from content: a ticket is
//! keyed under the cascade naming the classifier that will answer it, so a switch gives new
//! keys, as a new version does. Each process reads the switch at most once per [`REFRESH`]:
//! ingest stays one statement per ticket.

use std::{
    borrow::Cow,
    sync::Mutex,
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;

use crate::{
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::Versions,
    },
};

/// How long a process keeps what it read: a switch reaches every warm process within it.
pub const REFRESH: Duration = Duration::from_secs(30);

/// One switch, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Switch {
    pub local_version: String,
    pub switched_at: DateTime<Utc>,
    pub switched_by: String,
    pub reason: String,
    /// The classifier live before it; `None`: the configured cascade's own.
    pub previous: Option<String>,
}

const LIVE: &str = "SELECT local_version FROM cascade_switch ORDER BY id DESC LIMIT 1";

/// Records the switch only to a stored classifier, and answers the one it replaces.
const SWITCH: &str = r#"
WITH previous AS (
    SELECT local_version FROM cascade_switch ORDER BY id DESC LIMIT 1
), switched AS (
    INSERT INTO cascade_switch (local_version, switched_by, reason)
    SELECT $1, $2, $3
    WHERE EXISTS (SELECT 1 FROM local_model WHERE version = $1)
    RETURNING switched_at
)
SELECT switched.switched_at, previous.local_version
FROM switched LEFT JOIN previous ON true
"#;

/// The classifier switched to last, as one process (one API, one connector) reads it.
#[derive(Debug, Default)]
pub struct Live {
    seen: Mutex<Option<(Instant, Option<String>)>>,
}

impl Live {
    /// `configured` with its cascade answered by the classifier switched to last; the
    /// configured versions themselves when they name no cascade or nothing was switched.
    pub async fn versions<'a>(
        &self,
        pool: &Pool,
        configured: &'a Versions,
    ) -> Result<Cow<'a, Versions>> {
        if configured.model.cascade().is_none() {
            return Ok(Cow::Borrowed(configured));
        }
        let live = self.local(pool).await?;
        Ok(
            match live.and_then(|local| configured.model.with_local(&local)) {
                Some(model) => Cow::Owned(Versions {
                    model,
                    ..configured.clone()
                }),
                None => Cow::Borrowed(configured),
            },
        )
    }

    async fn local(&self, pool: &Pool) -> Result<Option<String>> {
        if let Some((at, local)) = self.seen.lock().expect("poisoned").as_ref() {
            if at.elapsed() < REFRESH {
                return Ok(local.clone());
            }
        }
        let local = live(&db::client(pool).await?).await?;
        *self.seen.lock().expect("poisoned") = Some((Instant::now(), local.clone()));
        Ok(local)
    }

    /// Forgets what was read: this process's next ticket reads the switch anew.
    pub fn forget(&self) {
        *self.seen.lock().expect("poisoned") = None;
    }
}

/// The classifier switched to last, read now.
pub async fn live(client: &impl GenericClient) -> Result<Option<String>> {
    Ok(client.query_opt(LIVE, &[]).await?.map(|row| row.get(0)))
}

/// Switches configured cascades to the stored classifier `local` (refused for one that is not
/// stored). The caller audits it.
pub async fn switch(
    client: &impl GenericClient,
    local: &str,
    by: &str,
    reason: &str,
) -> Result<Switch> {
    let row = client
        .query_opt(SWITCH, &[&local, &by, &reason])
        .await?
        .ok_or_else(|| {
            InvalidRequest::new(
                "version",
                format!("no classifier {local} is stored (`triage models` lists them)"),
            )
        })?;
    tracing::info!(local, by, "cascade switched");
    Ok(Switch {
        local_version: local.to_string(),
        switched_at: row.get(0),
        switched_by: by.to_string(),
        reason: reason.to_string(),
        previous: row.get(1),
    })
}
