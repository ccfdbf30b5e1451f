//! The operations on-call runs (docs/runbook.md): one [`Request`] type with one entry point,
//! [`run`], shared by the CLI (as subcommands) and the ops Lambda (as its JSON payload), so
//! both do exactly the same thing.
//! An entry-point layer: uses the pipeline (reports), evaluate (prompt versions), config, db
//! and the domain.

pub mod promote;
pub mod redrive;
pub mod reprocess;
mod request;
pub mod shadow;

use std::time::Duration;

use chrono::Utc;
use deadpool_postgres::Pool;
use serde::Serialize;

pub use request::{HumanDuration, Request, Since};

use crate::{
    config::Config,
    domain::{
        error::{InvalidRequest, Result},
        versions::{ModelVersion, PromptVersion, VersionPair},
    },
    evaluate::Prompt,
    pipeline::report::{self, DeadLetterGroup, Health},
    telemetry::metric,
};

/// Reprocess and redrive spread new work over this window by default (article step 6).
pub const DEFAULT_SPREAD: Duration = Duration::from_secs(30 * 60);
/// Rows per statement in reprocess and redrive: one short transaction each.
pub const BATCH_SIZE: i64 = 1000;
/// How far back `dead_letters` looks by default, as the alarm does.
const DEFAULT_DEAD_LETTER_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// What an operation did. Serialised as the report alone (the caller knows what it asked).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Reprocess(reprocess::Report),
    ShadowDiff(Box<shadow::ShadowDiff>),
    Promote(promote::Promotion),
    Redrive(redrive::Report),
    Stats(Health),
    DeadLetters(Vec<DeadLetterGroup>),
}

pub async fn run(pool: &Pool, config: &Config, request: Request) -> Result<Outcome> {
    // Every operation leaves a trace on the dashboard, whoever ran it and however it ended.
    metric::operation(request.name());
    let pair = |prompt_version, model_version: Option<ModelVersion>| VersionPair {
        prompt_version,
        model_version: model_version.unwrap_or_else(|| config.versions.model.clone()),
    };
    let spread = |spread: Option<HumanDuration>| spread.map_or(DEFAULT_SPREAD, |s| s.0);
    Ok(match request {
        Request::Reprocess {
            since,
            prompt_version,
            model_version,
            spread: pacing,
            dry_run,
        } => {
            known_to_this_build(&prompt_version)?;
            let plan = reprocess::Plan {
                since: since.resolve(Utc::now()),
                versions: pair(prompt_version, model_version),
                spread: spread(pacing),
                batch_size: BATCH_SIZE,
                dry_run,
            };
            Outcome::Reprocess(reprocess::reprocess(pool, &plan).await?)
        }
        Request::ShadowDiff { from, to } => {
            let configured = &config.versions.model;
            let (from, to) = (from.resolve(configured), to.resolve(configured));
            Outcome::ShadowDiff(Box::new(shadow::shadow_diff(pool, &from, &to).await?))
        }
        Request::Promote {
            prompt_version,
            model_version,
        } => {
            let version = pair(prompt_version, model_version);
            Outcome::Promote(promote::promote(pool, &version).await?)
        }
        Request::Redrive {
            reason,
            since,
            limit,
            spread: pacing,
            dry_run,
        } => {
            let selection = redrive::Selection {
                reason,
                since: since.map(|s| s.0),
                limit,
                spread: spread(pacing),
                batch_size: BATCH_SIZE,
                dry_run,
            };
            Outcome::Redrive(redrive::redrive(pool, &selection).await?)
        }
        Request::Stats => {
            Outcome::Stats(report::health(pool, config.worker.daily_budget_usd).await?)
        }
        Request::DeadLetters { since } => {
            let since = since.map_or(DEFAULT_DEAD_LETTER_WINDOW, |s| s.0);
            Outcome::DeadLetters(report::dead_letters(pool, since).await?)
        }
    })
}

/// A reprocess under a prompt this build cannot send would only fill the dead letters.
fn known_to_this_build(prompt_version: &PromptVersion) -> Result<(), InvalidRequest> {
    if Prompt::known_versions().any(|v| v == prompt_version.as_str()) {
        return Ok(());
    }
    Err(InvalidRequest::new(
        "prompt_version",
        format!(
            "{:?} is not in this build (known: {})",
            prompt_version.as_str(),
            Prompt::known_versions().collect::<Vec<_>>().join(", ")
        ),
    ))
}
