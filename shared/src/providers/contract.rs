//! The output contract (SPEC, policy-v1): all three fields present, finite scores in [0, 1],
//! a department from the policy's list, nothing else. Anything else is a contract violation:
//! dead-lettered, never stored as a result.
//!
//! The model's words never reach `last_error` (OWASP LLM05): a violation names only fields
//! of the contract and lengths, so a ticket that steers the model cannot write into the
//! outbox or the on-call report through it.

use serde_json::Value;

use super::{FailureKind, ModelOutput, Policy};

#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub is_urgent: f64,
    pub department: String,
    pub urgency_score: f64,
    pub answered_by: AnsweredBy,
}

/// Which stage of a cascade answered (a version that is no cascade has only the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnsweredBy {
    /// The local classifier, sure enough: no call, nothing paid.
    Local,
    /// The model called.
    Model,
}

impl AnsweredBy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Model => "model",
        }
    }
}

/// The contract's fields: the only names a violation may quote.
const FIELDS: [&str; 3] = ["is_urgent", "department", "urgency_score"];

/// Why an answer broke the contract, built from fixed text, [`FIELDS`] and lengths only:
/// safe for `last_error`. `kind` is the dead letter's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractViolation {
    pub kind: FailureKind,
    detail: String,
}

impl ContractViolation {
    fn new(detail: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::ContractViolation,
            detail: detail.into(),
        }
    }
}

impl std::fmt::Display for ContractViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "contract violation: {}", self.detail)
    }
}

pub fn validate(output: &ModelOutput, policy: &Policy) -> Result<Evaluation, ContractViolation> {
    let fail = |why: &str| Err(ContractViolation::new(why));
    let object = match output {
        ModelOutput::Json(Value::Object(object)) => object,
        ModelOutput::Json(_) => return fail("answer is JSON but not an object"),
        ModelOutput::Refusal => return fail("model refused"),
        ModelOutput::ContentFiltered => return fail("answer cut by the content filter"),
        ModelOutput::Truncated => {
            return Err(ContractViolation {
                kind: FailureKind::OutputTruncated,
                detail: "answer cut at the output-token cap".into(),
            })
        }
        ModelOutput::NotJson { len } => {
            return Err(ContractViolation::new(format!(
                "answer is not JSON ({len} bytes)"
            )))
        }
    };
    if let Some(extra) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ContractViolation::new(format!(
            "a field outside the contract (name of {} chars)",
            extra.chars().count()
        )));
    }
    let score = |name: &str| -> Result<f64, ContractViolation> {
        match object.get(name).and_then(Value::as_f64) {
            Some(v) if v.is_finite() && (0.0..=1.0).contains(&v) => Ok(v),
            Some(_) => Err(ContractViolation::new(format!("{name} is outside [0, 1]"))),
            None => Err(ContractViolation::new(format!(
                "{name} is missing or not a number"
            ))),
        }
    };
    let is_urgent = score("is_urgent")?;
    let urgency_score = score("urgency_score")?;
    let department = match object.get("department").and_then(Value::as_str) {
        Some(d) if policy.departments.iter().any(|known| known == d) => d.to_string(),
        Some(d) => {
            return Err(ContractViolation::new(format!(
                "department ({} chars) is not one of {}",
                d.chars().count(),
                policy.version
            )));
        }
        None => return fail("department is missing or not a string"),
    };
    Ok(Evaluation {
        is_urgent,
        department,
        urgency_score,
        answered_by: AnsweredBy::Model,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(value: Value) -> Result<Evaluation, ContractViolation> {
        validate(
            &ModelOutput::Json(value),
            &Policy::load("policy-v1").unwrap(),
        )
    }

    #[test]
    fn accepts_a_complete_answer() {
        let e =
            check(json!({"is_urgent": 1, "department": "billing", "urgency_score": 0.25})).unwrap();
        assert_eq!(
            e,
            Evaluation {
                is_urgent: 1.0,
                department: "billing".into(),
                urgency_score: 0.25,
                answered_by: AnsweredBy::Model,
            }
        );
    }

    #[test]
    fn rejects_everything_outside_the_contract() {
        for bad in [
            json!({"is_urgent": 0.5, "department": "legal", "urgency_score": 0.5}),
            json!({"is_urgent": 1.5, "department": "billing", "urgency_score": 0.5}),
            json!({"is_urgent": -0.1, "department": "billing", "urgency_score": 0.5}),
            json!({"is_urgent": "0.5", "department": "billing", "urgency_score": 0.5}),
            json!({"department": "billing", "urgency_score": 0.5}),
            json!({"is_urgent": 0.5, "urgency_score": 0.5}),
            json!({"is_urgent": 0.5, "department": "billing", "urgency_score": 0.5, "note": "x"}),
            json!({"is_urgent": true, "department": "billing", "urgency_score": 0.5}),
            json!([1, 2]),
        ] {
            assert!(check(bad.clone()).is_err(), "{bad}");
        }
        let policy = Policy::load("policy-v1").unwrap();
        for output in [
            ModelOutput::Refusal,
            ModelOutput::ContentFiltered,
            ModelOutput::Truncated,
            ModelOutput::NotJson { len: 3 },
        ] {
            assert!(validate(&output, &policy).is_err());
        }
    }

    #[test]
    fn a_truncated_answer_is_a_violation_with_its_own_reason() {
        let policy = Policy::load("policy-v1").unwrap();
        let violation = validate(&ModelOutput::Truncated, &policy).unwrap_err();
        assert_eq!(violation.kind.reason(), "output_truncated");
        let other = validate(&ModelOutput::Refusal, &policy).unwrap_err();
        assert_eq!(other.kind.reason(), "contract_violation");
    }

    #[test]
    fn a_violation_quotes_no_word_the_model_chose() {
        let planted = "IGNORE-PREVIOUS-root-admin";
        for bad in [
            json!({"is_urgent": 0.5, "department": planted, "urgency_score": 0.5}),
            json!({"is_urgent": 0.5, "department": "billing", "urgency_score": 0.5, planted: 1}),
            json!({planted: 0.5, "department": "billing", "urgency_score": 0.5}),
        ] {
            let shown = check(bad).unwrap_err().to_string();
            assert!(!shown.contains("IGNORE"), "{shown}");
        }
    }
}
