//! How one environment variable is read: empty is unset, and a value that does not parse is a
//! `ConfigError` naming the variable.

use std::{str::FromStr, time::Duration};

use crate::domain::error::ConfigError;

pub(super) struct Env<'a, F: Fn(&str) -> Option<String>>(pub(super) &'a F);

impl<F: Fn(&str) -> Option<String>> Env<'_, F> {
    pub(super) fn optional(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.is_empty())
    }

    pub(super) fn string(&self, name: &str, default: &str) -> String {
        self.optional(name).unwrap_or_else(|| default.to_string())
    }

    pub(super) fn parsed<T: FromStr<Err: std::fmt::Display>>(
        &self,
        name: &str,
        default: &str,
    ) -> Result<T, ConfigError> {
        self.string(name, default)
            .parse()
            .map_err(|e| ConfigError::invalid(name, format!("{e}")))
    }

    pub(super) fn number<T: FromStr>(&self, name: &str, default: T) -> Result<T, ConfigError> {
        match self.optional(name) {
            None => Ok(default),
            Some(raw) => raw
                .trim()
                .parse()
                .map_err(|_| ConfigError::invalid(name, format!("{raw:?} is not a number"))),
        }
    }

    /// A share in [0, 1] (0 turns off what it sizes).
    pub(super) fn share(&self, name: &str, default: f64) -> Result<f64, ConfigError> {
        let share: f64 = self.number(name, default)?;
        if (0.0..=1.0).contains(&share) {
            Ok(share)
        } else {
            Err(ConfigError::invalid(
                name,
                format!("{share} is not a share between 0 and 1"),
            ))
        }
    }

    /// A share above 0 and at most 1 (a cap's: 0 would leave nothing).
    pub(super) fn positive_share(&self, name: &str, default: f64) -> Result<f64, ConfigError> {
        let share: f64 = self.number(name, default)?;
        if share > 0.0 && share <= 1.0 {
            Ok(share)
        } else {
            Err(ConfigError::invalid(
                name,
                format!("{share} is not a share above 0 and at most 1"),
            ))
        }
    }

    /// An amount of US dollars: finite and not negative; unset, `None`.
    pub(super) fn usd(&self, name: &str) -> Result<Option<f64>, ConfigError> {
        let Some(raw) = self.optional(name) else {
            return Ok(None);
        };
        match raw.trim().parse::<f64>() {
            Ok(usd) if usd.is_finite() && usd >= 0.0 => Ok(Some(usd)),
            _ => Err(ConfigError::invalid(
                name,
                format!("{raw:?} is not an amount of US dollars (e.g. 25 or 2.50)"),
            )),
        }
    }

    /// A per-minute limit: unset (or empty) is no limit; 0 is refused, it would stop all work.
    pub(super) fn limit(&self, name: &str) -> Result<Option<u32>, ConfigError> {
        match self.optional(name) {
            None => Ok(None),
            Some(_) => match self.number(name, 0u32)? {
                0 => Err(ConfigError::invalid(
                    name,
                    "must be at least 1 (unset = no limit)".into(),
                )),
                limit => Ok(Some(limit)),
            },
        }
    }

    pub(super) fn seconds(&self, name: &str, default: Duration) -> Result<Duration, ConfigError> {
        let secs: f64 = self.number(name, default.as_secs_f64())?;
        Duration::try_from_secs_f64(secs).map_err(|_| {
            ConfigError::invalid(name, format!("{secs} is not a valid number of seconds"))
        })
    }
}
