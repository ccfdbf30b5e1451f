//! The stored taxonomies (docs/taxonomy.md): added once, read by version. A taxonomy never
//! changes under its version (the version is its content's hash), so a process may keep what
//! it read for as long as it runs.

use std::{
    collections::HashMap,
    sync::{Mutex, OnceLock},
};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::{
    domain::{error::Result, taxonomy::Taxonomy},
    providers::Policy,
};

/// What `triage taxonomy add` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Added {
    pub policy_version: String,
    pub departments: usize,
    /// False when this content was stored already.
    pub new: bool,
}

/// A stored taxonomy as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listed {
    pub policy_version: String,
    pub name: String,
    pub departments: i32,
    pub added_at: DateTime<Utc>,
}

/// Stores `taxonomy` under its version; the same content again is no new row.
pub async fn add(client: &impl GenericClient, taxonomy: &Taxonomy) -> Result<Added> {
    let version = taxonomy.version();
    let departments = taxonomy.departments.len();
    let inserted = client
        .execute(
            "INSERT INTO taxonomy (version, name, canonical, departments) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (version) DO NOTHING",
            &[
                &version,
                &taxonomy.name,
                &taxonomy.canonical(),
                &(departments as i32),
            ],
        )
        .await?;
    Ok(Added {
        policy_version: version,
        departments,
        new: inserted == 1,
    })
}

/// Why a stored taxonomy cannot be used: missing, or its row does not read back as the
/// taxonomy its version names (edited by hand, say). Never answered with another policy.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    #[error("taxonomy {0:?} is not stored (triage taxonomy list; triage taxonomy add FILE)")]
    Missing(String),
    #[error("taxonomy {version:?} is stored but unreadable: {why}")]
    Unreadable { version: String, why: String },
}

/// The taxonomy stored under `version`, checked against its version.
pub async fn load(
    client: &impl GenericClient,
    version: &str,
) -> Result<std::result::Result<Taxonomy, Unusable>> {
    let row = client
        .query_opt(
            "SELECT canonical FROM taxonomy WHERE version = $1",
            &[&version],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Err(Unusable::Missing(version.to_string())));
    };
    let unreadable = |why: String| Unusable::Unreadable {
        version: version.to_string(),
        why,
    };
    Ok(match Taxonomy::parse(row.get::<_, &str>(0).as_bytes()) {
        Ok(taxonomy) if taxonomy.version() == version => Ok(taxonomy),
        Ok(taxonomy) => Err(unreadable(format!(
            "its content is version {}",
            taxonomy.version()
        ))),
        Err(e) => Err(unreadable(e.to_string())),
    })
}

/// The stored taxonomies' policies this process has read: a version's content never changes,
/// so what was read once stands while the process runs (as a classifier, `cascade::models`).
fn read_already() -> &'static Mutex<HashMap<String, Policy>> {
    static READ: OnceLock<Mutex<HashMap<String, Policy>>> = OnceLock::new();
    READ.get_or_init(Default::default)
}

/// The policy `version` names: a built-in one, or a stored taxonomy's, read from the database
/// the first time this process asks for it.
pub async fn policy(
    client: &impl GenericClient,
    version: &str,
) -> Result<std::result::Result<Policy, Unusable>> {
    if let Some(built_in) = Policy::load(version) {
        return Ok(Ok(built_in));
    }
    if let Some(read) = read_already()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(version)
    {
        return Ok(Ok(read.clone()));
    }
    let loaded = load(client, version).await?.map(Policy::of_taxonomy);
    if let Ok(policy) = &loaded {
        let mut read = read_already().lock().unwrap_or_else(|e| e.into_inner());
        read.insert(version.to_string(), policy.clone());
    }
    Ok(loaded)
}

/// Every stored taxonomy, newest first.
pub async fn list(client: &impl GenericClient) -> Result<Vec<Listed>> {
    let rows = client
        .query(
            "SELECT version, name, departments, added_at FROM taxonomy \
             ORDER BY added_at DESC, version",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| Listed {
            policy_version: row.get(0),
            name: row.get(1),
            departments: row.get(2),
            added_at: row.get(3),
        })
        .collect())
}
