//! The prompt registry: the text behind each prompt version, recorded (as a SHA-256) by the
//! first worker that carries it. The key names the prompt *version*, not its text, so an edit
//! under an existing version would make the cache serve answers to the old text as if they
//! were answers to the new one. A worker whose text differs refuses to run.
//!
//! The hash covers the text as sent to the model, the policy's departments filled in. The
//! built-in policy's prompts are recorded under their version (its keys do not name the
//! policy); a stored taxonomy's under `<version>/<policy version>` (`Prompt::registered_as`).

use deadpool_postgres::Pool;
use sha2::{Digest, Sha256};

use crate::{
    db,
    domain::error::{ConfigError, Result},
    providers::Prompt,
};

/// Records the versions seen for the first time and returns the stored hash of every version.
/// The no-op update makes `RETURNING` give the stored row also when it exists already (or was
/// recorded a moment ago by a concurrent worker: the conflict waits for it).
const RECORD: &str = r#"
INSERT INTO prompt_registry (prompt_version, sha256)
SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (prompt_version) DO UPDATE SET sha256 = prompt_registry.sha256
RETURNING prompt_version, sha256, first_seen
"#;

/// Checks `prompts` against the registry, recording new versions. Err names every version
/// whose text changed.
pub async fn verify<'a>(pool: &Pool, prompts: impl IntoIterator<Item = &'a Prompt>) -> Result<()> {
    let mut prompts: Vec<&Prompt> = prompts.into_iter().collect();
    // Rows are locked in this order; workers starting together must agree on it, or their
    // upserts deadlock.
    prompts.sort_by(|a, b| a.registered_as.cmp(&b.registered_as));
    let (versions, hashes): (Vec<&str>, Vec<String>) = prompts
        .into_iter()
        .map(|p| (p.registered_as.as_str(), sha256(&p.text)))
        .unzip();
    let client = db::client(pool).await?;
    let rows = client.query(RECORD, &[&versions, &hashes]).await?;
    let changed: Vec<String> = rows
        .iter()
        .filter(|row| {
            let version: &str = row.get(0);
            let i = versions.iter().position(|v| *v == version);
            i.is_some_and(|i| hashes[i] != row.get::<_, &str>(1))
        })
        .map(|row| {
            let first_seen: chrono::DateTime<chrono::Utc> = row.get(2);
            format!("{} (recorded {first_seen})", row.get::<_, &str>(0))
        })
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    Err(ConfigError::invalid(
        "prompts/",
        format!(
            "this build's text of {} differs from the text recorded under that version, and cached results answer the recorded text. Bump the version: put the new text under a new version (e.g. triage-v5) and restore the old file",
            changed.join(", ")
        ),
    )
    .into())
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}
