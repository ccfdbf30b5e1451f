//! The output contract (SPEC, policy-v1): all three fields present, finite scores in [0, 1],
//! a department from the policy's list, nothing else. Anything else is a contract violation:
//! dead-lettered, never stored as a result.

use serde_json::Value;

use super::{ModelOutput, Policy};

#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub is_urgent: f64,
    pub department: String,
    pub urgency_score: f64,
}

/// Why an answer broke the contract; ticket-free, safe for `last_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractViolation(pub String);

impl std::fmt::Display for ContractViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "contract violation: {}", self.0)
    }
}

pub fn validate(output: &ModelOutput, policy: &Policy) -> Result<Evaluation, ContractViolation> {
    let fail = |why: &str| Err(ContractViolation(why.to_string()));
    let object = match output {
        ModelOutput::Json(Value::Object(object)) => object,
        ModelOutput::Json(_) => return fail("answer is JSON but not an object"),
        ModelOutput::Refusal => return fail("model refused"),
        ModelOutput::ContentFiltered => return fail("answer cut by the content filter"),
        ModelOutput::Truncated => return fail("answer truncated at the token limit"),
        ModelOutput::NotJson { len } => {
            return Err(ContractViolation(format!(
                "answer is not JSON ({len} bytes)"
            )))
        }
    };
    if let Some(extra) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "is_urgent" | "department" | "urgency_score"))
    {
        return Err(ContractViolation(format!("unexpected field {extra:?}")));
    }
    let score = |name: &str| -> Result<f64, ContractViolation> {
        match object.get(name).and_then(Value::as_f64) {
            Some(v) if v.is_finite() && (0.0..=1.0).contains(&v) => Ok(v),
            Some(v) => Err(ContractViolation(format!("{name} = {v} is outside [0, 1]"))),
            None => Err(ContractViolation(format!(
                "{name} is missing or not a number"
            ))),
        }
    };
    let is_urgent = score("is_urgent")?;
    let urgency_score = score("urgency_score")?;
    let department = match object.get("department").and_then(Value::as_str) {
        Some(d) if policy.departments.iter().any(|known| known == d) => d.to_string(),
        Some(d) => {
            let shown: String = d.chars().take(40).collect();
            return Err(ContractViolation(format!(
                "department {shown:?} is not in {}",
                policy.version
            )));
        }
        None => return fail("department is missing or not a string"),
    };
    Ok(Evaluation {
        is_urgent,
        department,
        urgency_score,
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
                urgency_score: 0.25
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
}
