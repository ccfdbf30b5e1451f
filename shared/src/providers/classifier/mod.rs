//! The local classifier: the cheap first stage of a cascade. Most tickets are plain ("I was
//! charged twice", "can't log in"), and a linear model on hashed words and character n-grams
//! answers those in microseconds, for nothing, offline; only the tickets it is unsure of need
//! a large model. That split is only as good as its "sure": so the model's probabilities are
//! calibrated on tickets it did not train on, and a threshold on [`LocalAnswer::confidence`]
//! means what it says (docs/cascade.md).
//!
//! Pure and deterministic: no I/O, no clock, no randomness but a fixed-seed shuffle, so the
//! same examples in the same order give the same artefact, and its version
//! (`local-` + a digest of the bytes) names exactly one model. `features` turns text into
//! hashed n-grams, `train` fits the weights (the holdout fit and the final one side by side),
//! `calibrate` the temperatures, `artefact` writes and checks the bytes.

mod artefact;
mod calibrate;
mod features;
mod fit;
pub mod target;

#[cfg(test)]
mod artefact_tests;
#[cfg(test)]
mod synthetic;
#[cfg(test)]
mod tests;

use std::{cell::RefCell, fmt, sync::Arc, sync::OnceLock};

use serde_json::json;
use sha2::{Digest, Sha256};

use super::{
    EvaluationRequest, FailureKind, ModelOutput, Provider, ProviderError, ProviderReply, Usage,
};
use calibrate::Calibration;
use features::{FeatureSpec, Features};
use fit::{Hyper, Weights, HYPER};

/// One labelled ticket to learn from.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub subject: String,
    pub message: String,
    pub department: String,
    pub is_urgent: bool,
    /// How much this example counts (1.0 for an ordinary one; 0 leaves it out).
    pub weight: f32,
}

/// `text` cut to what the classifier reads of a field (its first 8 KiB, at a character
/// boundary): training holds no more of a ticket than prediction reads, so a long message
/// costs a training's memory no more than a short one's 8 KiB, and the examples merged by
/// text are the texts the classifier tells apart.
pub fn bounded(mut text: String) -> String {
    let kept = features::prefix(&text, features::MAX_FIELD_BYTES).len();
    if kept < text.len() {
        text.truncate(kept);
        text.shrink_to_fit();
    }
    text
}

/// What the local model says of one ticket.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalAnswer {
    /// The most probable department.
    pub department: String,
    /// Its calibrated probability.
    pub department_p: f64,
    /// Calibrated P(urgent): the answer's `is_urgent`, decided by the policy's own
    /// `urgent_threshold` as the large model's is.
    pub urgent_p: f64,
    /// What a cascade's threshold gates on ([`Gate`]): `department_p` for a classifier trained
    /// now.
    pub confidence: f64,
}

/// What a classifier's confidence is, fixed by its artefact's format so that a stored
/// classifier answers as it did when its thresholds were derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The department's probability alone (format 2, issue "It grades itself", item 8): the
    /// thresholds are derived against the department's correctness, and urgency is a
    /// calibrated probability the policy's `urgent_threshold` reads, so mixing it in deferred
    /// tickets whose department was sure (about 2 points of local share on the bank desk at
    /// equal precision).
    Department,
    /// `department_p · max(urgent_p, 1 − urgent_p)` (format 1): classifiers stored before.
    WholeAnswer,
}

impl Gate {
    fn confidence(self, department_p: f64, urgent_p: f64) -> f64 {
        match self {
            Gate::Department => department_p,
            Gate::WholeAnswer => department_p * urgent_p.max(1.0 - urgent_p),
        }
    }
}

/// The most departments a model holds: with the fewest buckets it still fits the size cap.
pub const MAX_DEPARTMENTS: usize = 255;

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("no examples of positive weight to train on")]
    NoExamples,
    #[error("the department list is empty")]
    NoDepartments,
    #[error("{count} departments: a local model holds at most {MAX_DEPARTMENTS}")]
    TooManyDepartments { count: usize },
    #[error("department {department:?} is listed twice")]
    DuplicateDepartment { department: String },
    #[error("a department name of {bytes} bytes: at most 65535")]
    DepartmentTooLong { bytes: usize },
    #[error("example {index} is labelled {department:?}, which is not in the department list")]
    UnknownDepartment { index: usize, department: String },
    #[error("example {index} has weight {weight}: a weight must be finite and not negative")]
    BadWeight { index: usize, weight: f32 },
    #[error("every example of positive weight is in {department:?}: nothing to tell apart")]
    OneDepartment { department: String },
}

#[derive(Debug, thiserror::Error)]
pub enum ArtefactError {
    #[error("not a local-model artefact (wrong magic bytes)")]
    Magic,
    #[error("local-model artefact format {found}; this build reads formats 1 to {expected}")]
    Format { found: u16, expected: u16 },
    #[error("local-model artefact truncated: {what} needs {needed} bytes, {left} left")]
    Truncated {
        what: &'static str,
        needed: usize,
        left: usize,
    },
    #[error("local-model artefact has {0} bytes after its digest")]
    TrailingBytes(usize),
    #[error("local-model artefact's digest does not match its content: damaged")]
    Digest,
    #[error("local-model artefact is malformed: {0}")]
    Malformed(&'static str),
}

/// A trained classifier. Built by [`LocalModel::train`] or [`LocalModel::from_bytes`].
pub struct LocalModel {
    departments: Vec<String>,
    spec: FeatureSpec,
    hyper: Hyper,
    calibration: Calibration,
    examples: usize,
    weights: Weights,
    gate: Gate,
    version: OnceLock<String>,
}

impl fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalModel")
            .field("version", &self.version())
            .field("departments", &self.departments)
            .field("examples", &self.examples)
            .field("calibration", &self.calibration)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// `departments`: the policy's list (the order of the output classes). Examples whose
    /// department is not in it are an error.
    pub fn train(examples: &[Example], departments: &[String]) -> Result<LocalModel, TrainError> {
        Self::train_with(examples, departments, &HYPER)
    }

    fn train_with(
        examples: &[Example],
        departments: &[String],
        hyper: &Hyper,
    ) -> Result<LocalModel, TrainError> {
        let (spec, calibration, weights) = fit::train(examples, departments, hyper)?;
        Ok(Self::assemble(
            departments.to_vec(),
            spec,
            *hyper,
            calibration,
            examples.len(),
            weights,
            Gate::Department,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        departments: Vec<String>,
        spec: FeatureSpec,
        hyper: Hyper,
        calibration: Calibration,
        examples: usize,
        weights: Weights,
        gate: Gate,
    ) -> Self {
        Self {
            departments,
            spec,
            hyper,
            calibration,
            examples,
            weights,
            gate,
            version: OnceLock::new(),
        }
    }

    pub fn predict(&self, subject: &str, message: &str) -> LocalAnswer {
        self.predict_where(subject, message, |_| true)
            .expect("a model has departments")
    }

    /// The answer restricted to `allowed` (a policy's list): its most probable department
    /// that the model knows, with that department's own probability, not renormalised, so the
    /// confidence errs low (towards the large model). `None` when the model knows none.
    pub fn predict_among(
        &self,
        subject: &str,
        message: &str,
        allowed: &[String],
    ) -> Option<LocalAnswer> {
        self.predict_where(subject, message, |department| allowed.contains(department))
    }

    fn predict_where(
        &self,
        subject: &str,
        message: &str,
        allowed: impl Fn(&String) -> bool,
    ) -> Option<LocalAnswer> {
        let (department_p, urgent_p) = self.probabilities(subject, message);
        let best = (0..department_p.len())
            .filter(|&k| allowed(&self.departments[k]))
            .reduce(|best, k| {
                if department_p[k] > department_p[best] {
                    k
                } else {
                    best
                }
            })?;
        let p = department_p[best];
        Some(LocalAnswer {
            department: self.departments[best].clone(),
            department_p: p,
            urgent_p,
            confidence: self.gate.confidence(p, urgent_p),
        })
    }

    /// What its confidence is.
    pub fn gate(&self) -> Gate {
        self.gate
    }

    pub fn departments(&self) -> &[String] {
        &self.departments
    }

    /// Whether it learnt urgency: `false` when every example it learnt from was on one side,
    /// and it answers that side with the certainty their number gives.
    pub fn learnt_urgency(&self) -> bool {
        self.calibration.learnt_urgency()
    }

    /// What its urgency is, in words (a training's report).
    pub fn urgency(&self) -> &'static str {
        match (self.learnt_urgency(), self.calibration.urgent_shift > 0.0) {
            (true, _) => "learnt",
            (false, false) => "never urgent in its examples",
            (false, true) => "always urgent in its examples",
        }
    }

    /// How many examples trained it.
    pub fn examples(&self) -> usize {
        self.examples
    }

    /// `local-` + the first 12 hex digits of SHA-256 of [`Self::to_bytes`]: versioned by
    /// content, so two stores of one model agree and a retrained one never takes its name.
    pub fn version(&self) -> String {
        self.version
            .get_or_init(|| {
                let digest = Sha256::digest(self.to_bytes());
                format!("local-{}", &hex::encode(digest)[..12])
            })
            .clone()
    }

    /// The artefact (see `artefact.rs` for the layout); the same model, the same bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        artefact::write(self)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<LocalModel, ArtefactError> {
        artefact::read(bytes)
    }

    /// Calibrated P(department) for each department, and P(urgent).
    fn probabilities(&self, subject: &str, message: &str) -> (Vec<f64>, f64) {
        thread_local! {
            // One buffer per thread (its counts are half a megabyte at 2^17 buckets), so a
            // prediction allocates only its answer.
            static FEATURES: RefCell<Features> = RefCell::default();
        }
        let classes = self.departments.len();
        let mut scores = vec![0.0f32; classes + 1];
        FEATURES.with(|features| {
            let mut features = features.borrow_mut();
            let x = features.extract(&self.spec, subject, message);
            self.weights.scores(x, &mut scores);
        });
        let temperature = f64::from(self.calibration.temperature);
        let mut department_p: Vec<f64> = scores[..classes]
            .iter()
            .map(|&l| f64::from(l) / temperature)
            .collect();
        let max = department_p
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        department_p.iter_mut().for_each(|l| *l = (*l - max).exp());
        let sum: f64 = department_p.iter().sum();
        department_p.iter_mut().for_each(|p| *p /= sum);
        let z = f64::from(self.calibration.urgent_scale) * f64::from(scores[classes])
            + f64::from(self.calibration.urgent_shift);
        (department_p, 1.0 / (1.0 + (-z).exp()))
    }
}

/// The local classifier behind the same trait as the large models: no network, no bill.
pub struct LocalProvider {
    pub model: Arc<LocalModel>,
}

impl Provider for LocalProvider {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn evaluate(
        &self,
        request: EvaluationRequest<'_>,
    ) -> Result<ProviderReply, ProviderError> {
        let answer = self
            .model
            .predict_among(
                request.subject,
                request.message,
                &request.policy.departments,
            )
            .ok_or_else(|| {
                // Every ticket would fail alike until the model or the policy changes.
                ProviderError::new(
                    FailureKind::RequestRejected,
                    "the policy names none of the local model's departments",
                )
            })?;
        Ok(ProviderReply {
            output: ModelOutput::Json(json!({
                "is_urgent": answer.urgent_p,
                "department": answer.department,
                "urgency_score": answer.urgent_p,
            })),
            usage: Usage::default(),
            http_status: 200,
            rate: Default::default(),
            confidence: Some(answer.confidence),
        })
    }
}
