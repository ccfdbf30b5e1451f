//! A cascade's threshold as a version writes it: a confidence (`0.92`) or a target precision
//! (`p0.97`), whose thresholds were derived with the classifier (docs/cascade.md).

use std::fmt;

/// When a cascade's classifier answers: at a confidence written in the version (`0.92`), or
/// at the thresholds derived for a target precision (`p0.97`: `triage train --precision
/// 0.97` stored them with the classifier, per department; docs/cascade.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Confidence(f64),
    Target(f64),
}

/// The least precision a numeric threshold is held to by the audit (SPEC).
pub const IMPLIED_TARGET_FLOOR: f64 = 0.9;

impl Threshold {
    /// The confidence written in the version, if it is one.
    pub fn confidence(self) -> Option<f64> {
        match self {
            Self::Confidence(c) => Some(c),
            Self::Target(_) => None,
        }
    }

    /// The target precision, if it is one.
    pub fn target(self) -> Option<f64> {
        match self {
            Self::Target(p) => Some(p),
            Self::Confidence(_) => None,
        }
    }

    /// The precision a cascade under this threshold promises, which its audit holds it to
    /// (SPEC): a target's own, a confidence's at least 0.9, since a threshold below 0.9 still
    /// promises answers worth giving without a call.
    pub fn implied_target(self) -> f64 {
        match self {
            Self::Target(p) => p,
            Self::Confidence(c) => c.max(IMPLIED_TARGET_FLOOR),
        }
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        match text.strip_prefix('p') {
            Some(p) => p
                .parse()
                .ok()
                .filter(|p| *p > 0.0 && *p <= 1.0)
                .map(Self::Target),
            None => text
                .parse()
                .ok()
                .filter(|t| (0.0..=1.0).contains(t))
                .map(Self::Confidence),
        }
    }
}

impl fmt::Display for Threshold {
    /// The shortest decimal that reads back the same, so `0.90` and `0.9` make one key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Confidence(c) => write!(f, "{c}"),
            Self::Target(p) => write!(f, "p{p}"),
        }
    }
}
