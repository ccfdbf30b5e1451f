//! The local classifiers `triage train` made, stored by content (`local_model`, V26): every
//! function loads the one a cascade's model version names, and keeps it for the life of its
//! process, since an artefact never changes under its version (its name is its digest). A
//! classifier may be retired (`triage models retire`): a kept one is used only while its row
//! is still stored, so a retired classifier stops answering in every warm process at once.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::{
    domain::error::{ConfigError, Result},
    providers::classifier::{target::Thresholds, LocalModel},
};

/// A stored classifier, as `triage models` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredModel {
    pub version: String,
    pub departments: Vec<String>,
    pub examples: i32,
    /// What trained it: `[{"source": "set:…", "examples": n}, …]`.
    pub sources: serde_json::Value,
    pub trained_by: String,
    pub created_at: DateTime<Utc>,
    pub bytes: i32,
    /// The training window (V35): the span of production data its database sources
    /// (`results:DAYS`, `feedback:DAYS`) could read, from the first read back DAYS days to
    /// when it was stored. `None` when it learnt from labelled sets only.
    pub trained_from: Option<DateTime<Utc>>,
    pub trained_until: Option<DateTime<Utc>>,
    /// Per source (V36): its window in days, the owner cap applied, and its examples per giver
    /// and per ticket owner (docs/labelling.md). `None` for classifiers stored before.
    pub provenance: Option<serde_json::Value>,
    /// How many tickets it learnt from were erased since (V29): it still holds what they
    /// taught it until it is retired.
    pub erased_tickets: i32,
    /// The thresholds derived for each target precision (V37, `triage train --precision`),
    /// which a cascade names as `p0.97`.
    pub targets: Vec<Thresholds>,
}

/// A classifier removed by [`retire`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retired {
    pub version: String,
    /// The production tickets it had recorded learning from (their records went with it).
    pub tickets: i64,
    /// Its artefact's size, gone with its row (the row is the classifier's only storage).
    pub bytes: i32,
}

/// What is recorded with a classifier beside its artefact.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    /// `[{"source": "set:…", "examples": n}, …]`.
    pub sources: &'a serde_json::Value,
    /// Per source: window, owner cap, examples per giver and owner.
    pub provenance: &'a serde_json::Value,
    pub trained_by: &'a str,
    /// Starts its training window (`None`: it read no production data).
    pub trained_from: Option<DateTime<Utc>>,
}

/// Stores `model` under its version; a model trained again from the same examples is the same
/// artefact and is stored once. Its training window ends now, when it is stored. Answers
/// whether it was new.
pub async fn store(
    client: &impl GenericClient,
    model: &LocalModel,
    with: Stored<'_>,
) -> Result<bool> {
    let Stored {
        sources,
        provenance,
        trained_by,
        trained_from,
    } = with;
    let stored = client
        .execute(
            "INSERT INTO local_model (version, artefact, departments, examples, sources, trained_by,
                                      trained_from, trained_until, provenance)
             VALUES ($1, $2, $3, $4, $5, $6, $7,
                     CASE WHEN $7::timestamptz IS NOT NULL THEN now() END, $8)
             ON CONFLICT (version) DO NOTHING",
            &[
                &model.version(),
                &model.to_bytes(),
                &model.departments(),
                &(model.examples() as i32),
                sources,
                &trained_by,
                &trained_from,
                provenance,
            ],
        )
        .await?;
    Ok(stored == 1)
}

/// Every stored classifier, newest first.
pub async fn list(client: &impl GenericClient) -> Result<Vec<StoredModel>> {
    let rows = client
        .query(
            "SELECT version, departments, examples, sources, trained_by, created_at,
                    octet_length(artefact), trained_from, trained_until, erased_tickets,
                    provenance,
                    (SELECT coalesce(jsonb_agg(t.derived ORDER BY t.target), '[]')
                     FROM local_model_target t WHERE t.version = m.version)
             FROM local_model m ORDER BY created_at DESC, version",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| StoredModel {
            version: row.get(0),
            departments: row.get(1),
            examples: row.get(2),
            sources: row.get(3),
            trained_by: row.get(4),
            created_at: row.get(5),
            bytes: row.get(6),
            trained_from: row.get(7),
            trained_until: row.get(8),
            erased_tickets: row.get(9),
            provenance: row.get(10),
            targets: serde_json::from_value(row.get(11)).unwrap_or_default(),
        })
        .collect())
}

/// Locks the classifier `version`'s row until the end of the caller's transaction, so that
/// nothing loads it in between a check and [`retire`]; false when no such one is stored.
pub async fn lock(client: &impl GenericClient, version: &str) -> Result<bool> {
    Ok(client
        .query_opt(
            "SELECT 1 FROM local_model WHERE version = $1 FOR UPDATE",
            &[&version],
        )
        .await?
        .is_some())
}

/// Removes the classifier `version`: its row holds its artefact, and its `local_model_ticket`
/// rows cascade, so no erasure names it again. `None` when no such one is stored.
pub async fn retire(client: &impl GenericClient, version: &str) -> Result<Option<Retired>> {
    let row = client
        .query_opt(
            r#"
WITH tickets AS (
    SELECT count(*) AS n FROM local_model_ticket WHERE version = $1
)
DELETE FROM local_model m USING tickets
WHERE m.version = $1
RETURNING tickets.n, octet_length(m.artefact)
"#,
            &[&version],
        )
        .await?;
    cache().lock().expect("cache poisoned").remove(version);
    Ok(row.map(|row| Retired {
        version: version.to_string(),
        tickets: row.get(0),
        bytes: row.get(1),
    }))
}

fn cache() -> &'static Mutex<HashMap<String, Arc<LocalModel>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<LocalModel>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The classifier `version`, from this process's cache or else the database; `None` when no
/// such classifier is stored. A kept one is used only while its row is still there (one
/// primary-key probe, no artefact read): a retired classifier answers no more, in any process.
pub async fn load(client: &impl GenericClient, version: &str) -> Result<Option<Arc<LocalModel>>> {
    let kept = cache()
        .lock()
        .expect("cache poisoned")
        .get(version)
        .cloned();
    if let Some(model) = kept {
        let stored = client
            .query_opt("SELECT 1 FROM local_model WHERE version = $1", &[&version])
            .await?
            .is_some();
        if stored {
            return Ok(Some(model));
        }
        cache().lock().expect("cache poisoned").remove(version);
        return Ok(None);
    }
    let Some(row) = client
        .query_opt(
            "SELECT artefact FROM local_model WHERE version = $1",
            &[&version],
        )
        .await?
    else {
        return Ok(None);
    };
    let model = LocalModel::from_bytes(row.get(0)).map_err(|e| {
        ConfigError::invalid("local_model", format!("{version} cannot be read: {e}"))
    })?;
    // The digest is the name: a row whose bytes do not hash to it is not this model.
    if model.version() != version {
        return Err(ConfigError::invalid(
            "local_model",
            format!("{version}'s artefact is {}", model.version()),
        )
        .into());
    }
    let model = Arc::new(model);
    cache()
        .lock()
        .expect("cache poisoned")
        .insert(version.to_string(), model.clone());
    Ok(Some(model))
}
