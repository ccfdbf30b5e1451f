//! The thresholds derived for a target precision (`local_model_target`, V37), stored with the
//! classifier they were derived for (`triage train --precision P`, cross-fitted on its
//! examples) and named by a cascade as `p0.97`. Derived from the same examples, they never
//! change under their classifier's version, so a process keeps what it read: the worker reads
//! them once per process, not per ticket. They go with their classifier when it is retired.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use deadpool_postgres::GenericClient;

use crate::{domain::error::Result, providers::classifier::target::Thresholds};

type Kept = HashMap<(String, u64), Arc<Thresholds>>;

/// A target as stored and looked up: to the sixth decimal, so `0.97` read from a payload and
/// from `p0.97` find the same row however each parser rounded.
fn key(target: f64) -> f64 {
    (target * 1e6).round() / 1e6
}

fn cache() -> &'static Mutex<Kept> {
    static CACHE: OnceLock<Mutex<Kept>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Stores `thresholds` for the classifier `version` (derived again from the same examples,
/// they are the same: the first stays).
pub async fn store(
    client: &impl GenericClient,
    version: &str,
    thresholds: &Thresholds,
    derived_by: &str,
) -> Result<()> {
    let derived = serde_json::to_value(thresholds).unwrap_or_default();
    client
        .execute(
            "INSERT INTO local_model_target (version, target, derived, derived_by)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (version, target) DO NOTHING",
            &[&version, &key(thresholds.target), &derived, &derived_by],
        )
        .await?;
    Ok(())
}

/// The thresholds derived for `target` with the classifier `version`, from this process's
/// cache or else the database; `None` when none were derived (`triage train --precision`).
pub async fn load(
    client: &impl GenericClient,
    version: &str,
    target: f64,
) -> Result<Option<Arc<Thresholds>>> {
    let target = key(target);
    let kept_as = (version.to_string(), target.to_bits());
    if let Some(kept) = cache().lock().expect("cache poisoned").get(&kept_as) {
        return Ok(Some(kept.clone()));
    }
    let Some(row) = client
        .query_opt(
            "SELECT derived FROM local_model_target WHERE version = $1 AND target = $2",
            &[&version, &target],
        )
        .await?
    else {
        return Ok(None);
    };
    // A row an older build wrote in another shape is no thresholds, rather than misread.
    let Ok(thresholds) = serde_json::from_value::<Thresholds>(row.get(0)) else {
        return Ok(None);
    };
    let thresholds = Arc::new(thresholds);
    cache()
        .lock()
        .expect("cache poisoned")
        .insert(kept_as, thresholds.clone());
    Ok(Some(thresholds))
}

/// Every target derived for `version`, lowest first.
pub async fn of_model(client: &impl GenericClient, version: &str) -> Result<Vec<Thresholds>> {
    let rows = client
        .query(
            "SELECT derived FROM local_model_target WHERE version = $1 ORDER BY target",
            &[&version],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|row| serde_json::from_value(row.get(0)).ok())
        .collect())
}
