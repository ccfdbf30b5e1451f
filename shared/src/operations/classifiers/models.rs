//! `triage models retire VERSION` (and the ops payload `{"op": "models", "action": {"retire":
//! {"version": V}}}`): a stored classifier removed, with its artefact and its record of the
//! tickets it learnt from, so an erasure reaches what was learnt (docs/cascade.md). Refused,
//! changing nothing, while a live cascade names it: the configured model version
//! (`TRIAGE_MODEL`) or the version promoted last, which readers see. Jobs still queued under a
//! cascade naming it meet a classifier that is not stored: dead-lettered
//! `unknown_local_model`, as before it was trained (the report counts them).

use deadpool_postgres::{GenericClient, Pool};
use serde::{Deserialize, Serialize};

use super::super::promote;
use crate::{
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::{ModelVersion, VersionPair},
    },
    pipeline::cascade::{
        models::{self as local, Retired},
        switch::{self, Switch},
    },
};

/// What `triage models` does besides listing. In the ops payload: `{"op": "models"}` lists,
/// `"action": {"retire": {"version": V}}` retires.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, clap::Subcommand)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelsAction {
    /// Remove a stored classifier (its artefact and its record of the tickets it learnt from:
    /// erasures name it no more). Refused while the configured model version (TRIAGE_MODEL) or
    /// the promoted version is a cascade naming it.
    Retire {
        /// As `triage models` lists it, e.g. local-3f2a9c1b0d4e.
        version: String,
    },
    /// Answer a configured cascade's new tickets with this stored classifier, at once, without
    /// a deploy (what `triage retrain` does when its candidate passes; by hand, a rollback).
    Switch {
        /// As `triage models` lists it, e.g. local-3f2a9c1b0d4e.
        version: String,
        /// Why, for the audit and the switch's history.
        #[arg(long)]
        reason: String,
    },
}

/// What `triage models retire` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retirement {
    #[serde(flatten)]
    pub retired: Retired,
    /// Jobs queued (pending or processing) under a cascade naming it when it went: the worker
    /// dead-letters them `unknown_local_model` (reprocess them under another version).
    pub queued_jobs: i64,
}

/// Queued jobs of cascades whose classifier is `$1` (`cascade(local-…,`), found through the
/// claim's and the sweeper's partial indexes, never by scanning the outbox's history.
const QUEUED: &str = r#"
SELECT count(*) FROM (
    SELECT model_version FROM evaluation_outbox WHERE status = 'pending'
    UNION ALL
    SELECT model_version FROM evaluation_outbox WHERE status = 'processing'
) queued
WHERE starts_with(model_version, $1)
"#;

/// Retires the classifier `version`, all or nothing (see the module).
pub async fn retire(pool: &Pool, configured: &ModelVersion, version: &str) -> Result<Retirement> {
    let mut client = db::client(pool).await?;
    let transaction = client.transaction().await?;
    // Held to the commit: a concurrent retire waits, then finds it gone.
    if !local::lock(&transaction, version).await? {
        return Err(unknown(version).into());
    }
    let promoted = promote::promoted(&transaction).await?;
    let live = switch::live(&transaction).await?;
    if let Some(why) = named_by(version, configured, promoted.as_ref(), live.as_deref()) {
        return Err(InvalidRequest::new("version", why).into());
    }
    let queued_jobs = queued(&transaction, version).await?;
    let retired = local::retire(&transaction, version)
        .await?
        .ok_or_else(|| unknown(version))?;
    transaction.commit().await?;
    tracing::info!(version, queued_jobs, "local classifier retired");
    Ok(Retirement {
        retired,
        queued_jobs,
    })
}

async fn queued(client: &impl GenericClient, version: &str) -> Result<i64> {
    let prefix = format!("cascade({version},");
    Ok(client.query_one(QUEUED, &[&prefix]).await?.get(0))
}

fn unknown(version: &str) -> InvalidRequest {
    InvalidRequest::new(
        "version",
        format!("{version:?} is not a stored classifier (triage models lists them)"),
    )
}

/// Switches a configured cascade to the stored classifier `version` (see [`switch`]).
pub async fn switch_to(
    pool: &Pool,
    configured: &ModelVersion,
    version: &str,
    by: &str,
    reason: &str,
) -> Result<Switch> {
    if configured.cascade().is_none() {
        return Err(InvalidRequest::new(
            "version",
            format!(
                "the configured model version {configured} (TRIAGE_MODEL) is not a cascade: \
                 there is nothing to switch"
            ),
        )
        .into());
    }
    let client = db::client(pool).await?;
    switch::switch(&client, version, by, reason).await
}

/// Why `version` may not be retired: a live cascade names it (the configured model version,
/// the classifier it is switched to, or the version promoted last). `None`: nothing live does.
pub fn named_by(
    version: &str,
    configured: &ModelVersion,
    promoted: Option<&VersionPair>,
    live: Option<&str>,
) -> Option<String> {
    let names = |model: &ModelVersion| model.cascade().is_some_and(|c| c.local == version);
    if configured.cascade().is_some() && live == Some(version) {
        return Some(format!(
            "the configured cascade is switched to {version}, which answers new tickets: \
             `triage models switch` to another classifier, then retire it"
        ));
    }
    if names(configured) {
        return Some(format!(
            "{version} is named by the configured model version {configured} (TRIAGE_MODEL): \
             switch the cascade to another classifier, then retire it"
        ));
    }
    match promoted {
        Some(pair) if names(&pair.model_version) => Some(format!(
            "{version} is named by the promoted version {pair}, which GET /tickets/{{id}} \
             shows: promote another version, then retire it"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_classifier_is_refused_only_while_the_configured_or_promoted_cascade_names_it() {
        let model = |s: &str| s.parse::<ModelVersion>().unwrap();
        let pair = |m: &str| VersionPair {
            prompt_version: "triage-v5".parse().unwrap(),
            model_version: model(m),
        };
        let it = "local-3f2a9c1b0d4e";
        let naming = format!("cascade({it},0.9,gpt-6-luna@medium)");
        let other = "cascade(local-000000000000,0.9,gpt-6-luna@medium)";
        let plain = model("gpt-6-luna@medium");
        for (configured, promoted, refused) in [
            (plain.clone(), None, false),
            (model(other), Some(pair(other)), false),
            (plain.clone(), Some(pair("gpt-6-luna@high")), false),
            (model(&naming), None, true),
            (model(&naming), Some(pair(other)), true),
            (plain.clone(), Some(pair(&naming)), true),
        ] {
            let why = named_by(it, &configured, promoted.as_ref(), None);
            assert_eq!(why.is_some(), refused, "{configured} {promoted:?}: {why:?}");
        }
        let why = named_by(it, &model(&naming), None, None).unwrap();
        assert!(why.contains("TRIAGE_MODEL") && why.contains(it), "{why}");
        let why = named_by(it, &plain, Some(&pair(&naming)), None).unwrap();
        assert!(why.contains("promoted"), "{why}");
        // A prefix of another classifier's name is not its name.
        assert!(named_by("local-3f2a", &model(&naming), None, None).is_none());
        // The classifier a configured cascade is switched to answers its new tickets.
        let why = named_by(it, &model(other), None, Some(it)).unwrap();
        assert!(why.contains("switched"), "{why}");
        assert!(named_by(it, &plain, None, Some(it)).is_none());
    }
}
