//! The versions an evaluation is made under, typed: they enter the content key, so a typo
//! (`gpt-6-luna` for `gpt-6-luna@medium`) would bill every ticket again. User input
//! (environment, CLI, ops payloads) is parsed strictly, once, at the edge; stored values are
//! read back as they were written.

use std::{fmt, str::FromStr};

use bytes::BytesMut;
use serde::{Deserialize, Serialize};
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};

use super::error::InvalidRequest;
pub use super::threshold::Threshold;

/// A prompt version, e.g. `triage-v3` (a file in `prompts/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PromptVersion(String);

/// A policy version, e.g. `policy-v1` (the departments and the output contract).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyVersion(String);

/// `model@effort`, e.g. `gpt-6-luna@medium`; the offline classifier is `rules@offline`; a
/// cascade is `cascade(LOCAL,THRESHOLD,MODEL@EFFORT)` (see [`Cascade`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelVersion {
    text: String,
    /// Where the called model's `model@effort` is in `text`: all of it, or a cascade's last
    /// part (the large model, the one a provider is called with and priced by).
    called: (usize, usize),
    /// Where `@` is in `text` (the called part's end when a stored value has none).
    at: usize,
}

/// A cascade's parts: the local classifier answers when its confidence is at least
/// `threshold`, else `large` is called (docs/cascade.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Cascade {
    /// `local-<hex>`: a trained classifier, stored by `triage train`.
    pub local: String,
    pub threshold: Threshold,
    pub large: ModelVersion,
}

impl Cascade {
    const PREFIX: &'static str = "cascade(";
}

impl PromptVersion {
    pub fn as_str(&self) -> &str {
        &self.0
    }
    fn from_stored(text: &str) -> Self {
        Self(text.to_string())
    }
}

impl PolicyVersion {
    pub fn as_str(&self) -> &str {
        &self.0
    }
    fn from_stored(text: &str) -> Self {
        Self(text.to_string())
    }
}

impl ModelVersion {
    /// The offline keyword classifier: not the named model, so its results are never cached
    /// under a real model's keys.
    pub const RULES: &'static str = "rules@offline";

    pub fn rules() -> Self {
        Self::from_stored(Self::RULES)
    }
    pub fn new(model: &str, effort: &str) -> Result<Self, InvalidRequest> {
        format!("{model}@{effort}").parse()
    }
    pub fn as_str(&self) -> &str {
        &self.text
    }
    /// The model a provider is called with (a cascade's large model).
    pub fn model(&self) -> &str {
        &self.text[self.called.0..self.at]
    }
    pub fn effort(&self) -> &str {
        self.text.get(self.at + 1..self.called.1).unwrap_or("")
    }
    /// The cascade this version names, if it is one.
    pub fn cascade(&self) -> Option<Cascade> {
        let inner = self.text.strip_prefix(Cascade::PREFIX)?.strip_suffix(')')?;
        let mut parts = inner.splitn(3, ',');
        let (local, threshold, large) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Cascade {
            local: local.to_string(),
            threshold: Threshold::parse(threshold)?,
            large: Self::from_stored(large),
        })
    }
    /// This cascade answered by the classifier `local` instead (the threshold and the large
    /// model kept as written); `None` when this version is not a cascade.
    pub fn with_local(&self, local: &str) -> Option<ModelVersion> {
        let inner = self.text.strip_prefix(Cascade::PREFIX)?;
        let (_, rest) = inner.split_once(',')?;
        Some(Self::from_stored(&format!(
            "{}{local},{rest}",
            Cascade::PREFIX
        )))
    }
    pub fn is_rules(&self) -> bool {
        self.model() == "rules"
    }
    /// A value as stored (or as a provider test names it): not checked, since what was
    /// written must be read back, whatever an older build accepted.
    pub fn from_stored(text: &str) -> Self {
        let called = match text.strip_prefix(Cascade::PREFIX) {
            Some(inner) if text.ends_with(')') => {
                let start = inner
                    .match_indices(',')
                    .nth(1)
                    .map_or(text.len(), |(i, _)| i + 1);
                (
                    Cascade::PREFIX.len() + start.min(inner.len()),
                    text.len() - 1,
                )
            }
            _ => (0, text.len()),
        };
        let at = text[called.0..called.1]
            .rfind('@')
            .map_or(called.1, |i| called.0 + i);
        Self {
            text: text.to_string(),
            called,
            at,
        }
    }

    /// `cascade(LOCAL,THRESHOLD,MODEL@EFFORT)`, written canonically (the threshold as the
    /// shortest decimal that reads back the same), so `0.90` and `0.9` make one key.
    fn parse_cascade(inner: &str, whole: &str) -> Result<Self, InvalidRequest> {
        let invalid = |why: String| {
            InvalidRequest::new(
                "model_version",
                format!(
                    "{whole:?} is not cascade(LOCAL,THRESHOLD,MODEL@EFFORT) \
                     (e.g. cascade(local-3f2a9c,0.92,gpt-6-luna@medium)): {why}"
                ),
            )
        };
        let mut parts = inner.splitn(3, ',');
        let (Some(local), Some(threshold), Some(large)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid("it needs three parts".into()));
        };
        let hex = local.strip_prefix("local-").unwrap_or("");
        if hex.is_empty()
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid(format!(
                "{local:?} is not local-<hex> (see triage models)"
            )));
        }
        let Some(threshold) = Threshold::parse(threshold) else {
            return Err(invalid(format!(
                "{threshold:?} is neither a threshold in [0, 1] nor a target precision \
                 p(0, 1] (e.g. p0.97)"
            )));
        };
        let large: ModelVersion = large
            .parse()
            .map_err(|e: InvalidRequest| invalid(e.reason))?;
        if large.cascade().is_some() || large.is_rules() {
            return Err(invalid("its last part must be a large model".into()));
        }
        Ok(Self::from_stored(&format!(
            "{}{local},{threshold},{large})",
            Cascade::PREFIX
        )))
    }
}

impl FromStr for PromptVersion {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // A `/` would make `prompt/model` specs ambiguous.
        if s.is_empty() || s.contains('/') || s.trim() != s {
            return Err(InvalidRequest::new(
                "prompt_version",
                format!("{s:?} is not a prompt version (e.g. triage-v3)"),
            ));
        }
        Ok(Self(s.to_string()))
    }
}

impl FromStr for PolicyVersion {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || s.trim() != s {
            return Err(InvalidRequest::new(
                "policy_version",
                format!("{s:?} is not a policy version (e.g. policy-v1)"),
            ));
        }
        Ok(Self(s.to_string()))
    }
}

impl FromStr for ModelVersion {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(inner) = s.strip_prefix(Cascade::PREFIX) {
            let inner = inner.strip_suffix(')').unwrap_or(inner);
            return Self::parse_cascade(inner, s);
        }
        match s.rsplit_once('@') {
            Some((model, effort)) if !model.is_empty() && !effort.is_empty() && s.trim() == s => {
                Ok(Self::from_stored(s))
            }
            _ => Err(InvalidRequest::new(
                "model_version",
                format!("{s:?} is not model@effort (e.g. gpt-6-luna@high)"),
            )),
        }
    }
}

/// Text, database, and JSON forms of a version: the text as written.
macro_rules! version_text {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }
        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
            }
        }
        impl ToSql for $t {
            fn to_sql(
                &self,
                ty: &Type,
                out: &mut BytesMut,
            ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
                self.as_str().to_sql(ty, out)
            }
            fn accepts(ty: &Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }
            to_sql_checked!();
        }
        impl<'a> FromSql<'a> for $t {
            fn from_sql(
                ty: &Type,
                raw: &'a [u8],
            ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
                <&str as FromSql>::from_sql(ty, raw).map(Self::from_stored)
            }
            fn accepts(ty: &Type) -> bool {
                <&str as FromSql>::accepts(ty)
            }
        }
    )*};
}
version_text!(PromptVersion, PolicyVersion, ModelVersion);

/// The versions an evaluation is computed (and its key derived) under: the configured ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    pub prompt: PromptVersion,
    pub model: ModelVersion,
    pub policy: PolicyVersion,
}

impl Versions {
    pub fn pair(&self) -> VersionPair {
        VersionPair {
            prompt_version: self.prompt.clone(),
            model_version: self.model.clone(),
        }
    }
}

/// A prompt version and a model version: what a result, a reprocess or a promotion names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionPair {
    pub prompt_version: PromptVersion,
    pub model_version: ModelVersion,
}

/// As a [`VersionSpec`] writes it: `triage-v3/gpt-6-luna@high`.
impl fmt::Display for VersionPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.prompt_version, self.model_version)
    }
}

/// `prompt` or `prompt/model` (`triage-v3/gpt-6-luna@high`); a prompt alone means the
/// configured model, as reprocess defaults to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSpec {
    pub prompt_version: PromptVersion,
    pub model_version: Option<ModelVersion>,
}

impl VersionSpec {
    pub fn resolve(self, configured_model: &ModelVersion) -> VersionPair {
        VersionPair {
            prompt_version: self.prompt_version,
            model_version: self
                .model_version
                .unwrap_or_else(|| configured_model.clone()),
        }
    }
}

impl FromStr for VersionSpec {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Prompt versions have no '/'; a model name may (`org/model@effort`).
        let (prompt, model) = match s.split_once('/') {
            Some((prompt, model)) => (prompt, Some(model)),
            None => (s, None),
        };
        let invalid = |_| {
            InvalidRequest::new(
                "version",
                format!("{s:?} is not prompt or prompt/model (e.g. triage-v3/gpt-6-luna@high)"),
            )
        };
        Ok(Self {
            prompt_version: prompt.parse().map_err(invalid)?,
            model_version: model.map(str::parse).transpose().map_err(invalid)?,
        })
    }
}

impl fmt::Display for VersionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.model_version {
            Some(model) => write!(f, "{}/{model}", self.prompt_version),
            None => write!(f, "{}", self.prompt_version),
        }
    }
}

#[cfg(test)]
mod tests;
