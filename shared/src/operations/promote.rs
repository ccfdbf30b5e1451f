//! Promotion: which prompt/model version `GET /tickets/{id}` shows. Recorded in the database
//! (newest promotion wins), so every API container switches at once, without a deploy, and
//! undoing it is promoting the previous version again. Without a promotion the configured
//! version is shown. New tickets are still keyed under the configured version: see
//! `docs/runbook.md`.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;

use crate::quality::{
    gate::{self, Figures, Verdict},
    runs, source,
};
use crate::{
    config::Config,
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::{PromptVersion, VersionPair},
    },
    pipeline::outbox::announce,
    providers::Policy,
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Promotion {
    #[serde(flatten)]
    pub version: VersionPair,
    pub promoted_at: DateTime<Utc>,
    /// The promotion this one replaces; `None`: readers saw the configured version (the API's
    /// environment, which this process need not share).
    pub previous: Option<VersionPair>,
    /// Its results go to the desk's open Zendesk tickets too (`--write-back`).
    pub write_back: bool,
    /// What the quality gate said of a pass worth knowing ("no significant difference ...").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
}

/// Records the promotion only if a result exists under the version: a misspelt model version
/// would otherwise make every ticket silently fall back to its newest result.
const PROMOTE: &str = r#"
WITH previous AS (
    SELECT prompt_version, model_version FROM version_promotion ORDER BY id DESC LIMIT 1
), promoted AS (
    INSERT INTO version_promotion (prompt_version, model_version, write_back)
    SELECT $1, $2, $3
    WHERE EXISTS (SELECT 1 FROM evaluation_result WHERE prompt_version = $1 AND model_version = $2)
    RETURNING promoted_at
)
SELECT promoted.promoted_at, previous.prompt_version, previous.model_version
FROM promoted LEFT JOIN previous ON true
"#;

/// `write_back`: the desk asked for the version's results on its open Zendesk tickets
/// (`--write-back`); without it Zendesk is sent nothing, webhooks and buses hear as ever.
pub async fn promote(pool: &Pool, version: &VersionPair, write_back: bool) -> Result<Promotion> {
    let mut client = db::client(pool).await?;
    let tx = client.transaction().await?;
    let row = tx
        .query_opt(
            PROMOTE,
            &[&version.prompt_version, &version.model_version, &write_back],
        )
        .await?
        .ok_or_else(|| {
            InvalidRequest::new(
                "prompt_version/model_version",
                format!(
                    "no evaluation exists under {version}: reprocess under it and let the worker run first (or check the spelling)"
                ),
            )
        })?;
    let promotion = Promotion {
        version: version.clone(),
        promoted_at: row.get(0),
        previous: row
            .get::<_, Option<PromptVersion>>(1)
            .map(|prompt_version| VersionPair {
                prompt_version,
                model_version: row.get(2),
            }),
        write_back,
        gate: None,
    };
    // Results of the promoted version are announced to subscribers with the promotion.
    let announced = announce::announce_promoted(&tx, version, write_back).await?;
    tx.commit().await?;
    tracing::info!(?promotion, announced, "version promoted");
    Ok(promotion)
}

/// The newest promotion: the version readers see now (without one, the configured version).
const CURRENT: &str =
    "SELECT prompt_version, model_version FROM version_promotion ORDER BY id DESC LIMIT 1";

/// The version promoted last, if any: what `GET /tickets/{id}` shows now.
pub async fn promoted(client: &impl GenericClient) -> Result<Option<VersionPair>> {
    Ok(client
        .query_opt(CURRENT, &[])
        .await?
        .map(|row| VersionPair {
            prompt_version: row.get(0),
            model_version: row.get(1),
        }))
}

/// The quality gate (docs/quality.md): `version` must have an eval run under `policy` on the
/// test split of the configured set (`TRIAGE_EVAL_SET`, by digest) no worse than the current
/// version's under it by more than `TRIAGE_EVAL_TOLERANCE`, unless the paired test over the
/// families both runs scored finds the loss within noise. Refused with both versions' figures otherwise. A pass
/// answers what the operator should know ("no significant difference ..."), if anything.
pub async fn quality_gate(
    pool: &Pool,
    config: &Config,
    version: &VersionPair,
    policy: &Policy,
) -> Result<Option<String>> {
    let digest = source::configured_digest_now(config.quality.set.as_deref(), policy, pool).await?;
    let client = db::client(pool).await?;
    let current = promoted(&client)
        .await?
        .unwrap_or_else(|| config.versions.pair());
    let under = policy.version.as_str();
    let candidate_figures = runs::gate_figures(&client, &digest, version, under).await?;
    let current_figures = runs::gate_figures(&client, &digest, &current, under).await?;
    let shown = |f: Option<&Figures>| {
        f.map_or("no run".to_string(), |f| {
            format!(
                "macro-F1 {:.3}, urgent recall {:.3}",
                f.macro_f1, f.urgent_recall
            )
        })
    };
    let both = format!(
        "{version}: {}; current {current}: {}; set {}",
        shown(candidate_figures.as_ref()),
        shown(current_figures.as_ref()),
        &digest[..12.min(digest.len())],
    );
    match gate::decide(
        candidate_figures.as_ref(),
        current_figures.as_ref(),
        config.quality.tolerance,
    ) {
        Verdict::Pass(None) => Ok(None),
        Verdict::Pass(Some(note)) => {
            let note = format!("{version} passes: {note}. {both}.");
            tracing::info!(%note, "quality gate");
            Ok(Some(note))
        }
        Verdict::Refused(why) => Err(InvalidRequest::new(
            "quality_gate",
            format!(
                "{version} is refused: {why}. {both}. Override with --force --reason TEXT \
                 (audited)."
            ),
        )
        .into()),
    }
}
