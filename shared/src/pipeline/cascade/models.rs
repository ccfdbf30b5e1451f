//! The local classifiers `triage train` made, stored by content (`local_model`, V26): every
//! function loads the one a cascade's model version names, and keeps it for the life of its
//! process, since an artefact never changes under its version (its name is its digest).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::{
    domain::error::{ConfigError, Result},
    providers::classifier::LocalModel,
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
}

/// Stores `model` under its version; a model trained again from the same examples is the same
/// artefact and is stored once. Answers whether it was new.
pub async fn store(
    client: &impl GenericClient,
    model: &LocalModel,
    sources: &serde_json::Value,
    trained_by: &str,
) -> Result<bool> {
    let stored = client
        .execute(
            "INSERT INTO local_model (version, artefact, departments, examples, sources, trained_by)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (version) DO NOTHING",
            &[
                &model.version(),
                &model.to_bytes(),
                &model.departments(),
                &(model.examples() as i32),
                sources,
                &trained_by,
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
                    octet_length(artefact)
             FROM local_model ORDER BY created_at DESC, version",
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
        })
        .collect())
}

fn cache() -> &'static Mutex<HashMap<String, Arc<LocalModel>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<LocalModel>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The classifier `version`, from this process's cache or else the database; `None` when no
/// such classifier is stored.
pub async fn load(client: &impl GenericClient, version: &str) -> Result<Option<Arc<LocalModel>>> {
    if let Some(model) = cache().lock().expect("cache poisoned").get(version) {
        return Ok(Some(model.clone()));
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
