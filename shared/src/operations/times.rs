//! Times as an operator writes them: a point (RFC 3339) or a duration back from now.

use std::{fmt, str::FromStr, time::Duration};

use chrono::{DateTime, SecondsFormat, Utc};

use crate::domain::error::InvalidRequest;

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
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(at) = DateTime::parse_from_rfc3339(s) {
            return Ok(Since::At(at.with_timezone(&Utc)));
        }
        s.parse::<HumanDuration>()
            .map(|d| Since::Ago(d.0))
            .map_err(|_| {
                InvalidRequest::new(
                    "since",
                    format!("{s:?} is neither an RFC 3339 time (2026-11-01T00:00:00Z) nor a duration (90s, 30m, 2h, 1d)"),
                )
            })
    }
}

impl fmt::Display for Since {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Since::At(at) => f.write_str(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
            Since::Ago(ago) => HumanDuration(*ago).fmt(f),
        }
    }
}

/// A duration as people write it: `90s`, `30m`, `2h`, `1d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl FromStr for HumanDuration {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s)
            .map(HumanDuration)
            .map_err(|e| {
                InvalidRequest::new("duration", format!("{s:?}: {e} (e.g. 90s, 30m, 2h, 1d)"))
            })
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_duration(self.0).fmt(f)
    }
}
