//! The operations on-call runs (docs/runbook.md), as one request type with one entry point,
//! shared by the CLI (flags mapped onto [`Request`]) and the ops Lambda (the same request as a
//! JSON payload, `{"op": "reprocess", ...}`), so both do exactly the same thing.

use std::{fmt, str::FromStr, time::Duration};

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};

use crate::{
    config::Config,
    error::{ConfigError, Result},
    evaluate::Prompt,
    outbox::claim::Serves,
    promote::{self, Promotion},
    redrive,
    report::{self, DeadLetterGroup, Health},
    reprocess,
    shadow::{self, ShadowDiff},
    telemetry::metric,
};

/// Reprocess and redrive spread new work over this window by default (article step 6).
pub const DEFAULT_SPREAD: Duration = Duration::from_secs(30 * 60);
/// Rows per statement in reprocess and redrive: one short transaction each.
pub const BATCH_SIZE: i64 = 1000;
/// How far back `dead_letters` looks by default, as the alarm does.
const DEFAULT_DEAD_LETTER_WINDOW: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Queue every ticket since `since` again under new versions.
    Reprocess {
        since: Since,
        prompt_version: String,
        /// Default: the configured model version.
        #[serde(default)]
        model_version: Option<String>,
        #[serde(default)]
        spread: Option<HumanDuration>,
        #[serde(default)]
        dry_run: bool,
    },
    /// Compare the results of two versions on the tickets that have both.
    ShadowDiff {
        from: VersionSpec,
        to: VersionSpec,
    },
    /// Make `GET /tickets/{id}` show this version.
    Promote {
        prompt_version: String,
        #[serde(default)]
        model_version: Option<String>,
    },
    /// Dead letters back to the queue.
    Redrive {
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        since: Option<HumanDuration>,
        #[serde(default)]
        limit: Option<i64>,
        #[serde(default)]
        spread: Option<HumanDuration>,
        #[serde(default)]
        dry_run: bool,
    },
    Stats,
    DeadLetters {
        #[serde(default)]
        since: Option<HumanDuration>,
    },
}

impl Request {
    /// The `op` of the payload, for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Reprocess { .. } => "reprocess",
            Request::ShadowDiff { .. } => "shadow_diff",
            Request::Promote { .. } => "promote",
            Request::Redrive { .. } => "redrive",
            Request::Stats => "stats",
            Request::DeadLetters { .. } => "dead_letters",
        }
    }
}

/// What an operation did. Serialised as the report alone (the caller knows what it asked).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Reprocess(reprocess::Report),
    ShadowDiff(Box<ShadowDiff>),
    Promote(Promotion),
    Redrive(redrive::Report),
    Stats(Health),
    DeadLetters(Vec<DeadLetterGroup>),
}

pub async fn run(pool: &Pool, config: &Config, request: Request) -> Result<Outcome> {
    // Every operation leaves a trace on the dashboard, whoever ran it and however it ended.
    metric::operation(request.name());
    let model_or_configured = |model: Option<String>| -> Result<String> {
        let model = model.unwrap_or_else(|| config.versions.model.clone());
        // Keys of `gpt-6-luna` and `gpt-6-luna@medium` differ: a missing effort is a typo
        // that would bill every ticket again.
        match model.rsplit_once('@') {
            Some((name, effort)) if !name.is_empty() && !effort.is_empty() => Ok(model),
            _ => Err(ConfigError::invalid(
                "model_version",
                format!("{model:?} is not model@effort (e.g. gpt-6-luna@high)"),
            )
            .into()),
        }
    };
    Ok(match request {
        Request::Reprocess {
            since,
            prompt_version,
            model_version,
            spread,
            dry_run,
        } => {
            if !Prompt::known_versions().any(|v| v == prompt_version) {
                return Err(ConfigError::invalid(
                    "prompt_version",
                    format!(
                        "{prompt_version:?} is not in this build (known: {})",
                        Prompt::known_versions().collect::<Vec<_>>().join(", ")
                    ),
                )
                .into());
            }
            let plan = reprocess::Plan {
                since: since.resolve(Utc::now()),
                prompt_version,
                model_version: model_or_configured(model_version)?,
                spread: spread.map_or(DEFAULT_SPREAD, |s| s.0),
                batch_size: BATCH_SIZE,
                dry_run,
            };
            Outcome::Reprocess(reprocess::reprocess(pool, &plan).await?)
        }
        Request::ShadowDiff { from, to } => {
            let (from, to) = (from.resolve(config), to.resolve(config));
            Outcome::ShadowDiff(Box::new(shadow::shadow_diff(pool, &from, &to).await?))
        }
        Request::Promote {
            prompt_version,
            model_version,
        } => {
            let version = VersionPair {
                prompt_version,
                model_version: model_or_configured(model_version)?,
            };
            Outcome::Promote(promote::promote(pool, &version).await?)
        }
        Request::Redrive {
            reason,
            since,
            limit,
            spread,
            dry_run,
        } => {
            let selection = redrive::Selection {
                reason,
                since: since.map(|s| s.0),
                limit,
                spread: spread.map_or(DEFAULT_SPREAD, |s| s.0),
                batch_size: BATCH_SIZE,
                dry_run,
            };
            Outcome::Redrive(redrive::redrive(pool, &selection).await?)
        }
        Request::Stats => {
            let serves = Serves::for_model_version(&config.versions.model);
            Outcome::Stats(report::health(pool, serves).await?)
        }
        Request::DeadLetters { since } => {
            let since = since.map_or(DEFAULT_DEAD_LETTER_WINDOW, |s| s.0);
            Outcome::DeadLetters(report::dead_letters(pool, since).await?)
        }
    })
}

/// A prompt version and a model version (`model@effort`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionPair {
    pub prompt_version: String,
    pub model_version: String,
}

/// As a `VersionSpec` writes it: `triage-v3/gpt-6-luna@high`.
impl fmt::Display for VersionPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.prompt_version, self.model_version)
    }
}

/// `prompt` or `prompt/model` (`triage-v3/gpt-6-luna@high`); a prompt alone means the
/// configured model, as reprocess defaults to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSpec {
    pub prompt_version: String,
    pub model_version: Option<String>,
}

impl VersionSpec {
    pub fn resolve(self, config: &Config) -> VersionPair {
        VersionPair {
            prompt_version: self.prompt_version,
            model_version: self
                .model_version
                .unwrap_or_else(|| config.versions.model.clone()),
        }
    }
}

impl FromStr for VersionSpec {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Prompt versions have no '/'; a model name may (`org/model@effort`).
        let (prompt, model) = match s.split_once('/') {
            Some((prompt, model)) => (prompt, Some(model)),
            None => (s, None),
        };
        if prompt.is_empty() || model.is_some_and(str::is_empty) {
            return Err(ConfigError::invalid(
                "version",
                format!("{s:?} is not prompt or prompt/model (e.g. triage-v3/gpt-6-luna@high)"),
            ));
        }
        Ok(Self {
            prompt_version: prompt.to_string(),
            model_version: model.map(str::to_string),
        })
    }
}

/// A point in time as RFC 3339 (`2026-11-01T00:00:00Z`), or a duration back from now (`90s`,
/// `30m`, `2h`, `1d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    At(DateTime<Utc>),
    Ago(Duration),
}

impl Since {
    pub fn resolve(self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Since::At(at) => at,
            Since::Ago(ago) => chrono::Duration::from_std(ago)
                .ok()
                .and_then(|ago| now.checked_sub_signed(ago))
                // Further back than any ticket.
                .unwrap_or(DateTime::UNIX_EPOCH),
        }
    }
}

impl FromStr for Since {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(at) = DateTime::parse_from_rfc3339(s) {
            return Ok(Since::At(at.with_timezone(&Utc)));
        }
        s.parse::<HumanDuration>()
            .map(|d| Since::Ago(d.0))
            .map_err(|_| {
                ConfigError::invalid(
                    "since",
                    format!("{s:?} is neither an RFC 3339 time (2026-11-01T00:00:00Z) nor a duration (90s, 30m, 2h, 1d)"),
                )
            })
    }
}

/// A duration as people write it: `90s`, `30m`, `2h`, `1d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl FromStr for HumanDuration {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s)
            .map(HumanDuration)
            .map_err(|e| {
                ConfigError::invalid("duration", format!("{s:?}: {e} (e.g. 90s, 30m, 2h, 1d)"))
            })
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_duration(self.0).fmt(f)
    }
}

/// The payload's strings go through the same parsers as the CLI's flags.
macro_rules! deserialize_from_str {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}
deserialize_from_str!(VersionSpec, Since, HumanDuration);
