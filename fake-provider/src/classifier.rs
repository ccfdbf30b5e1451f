//! Classifier mode: answers from a label file (a labelled set, `evals/*.jsonl`) with a
//! configurable error rate, so a test of `triage eval` knows every answer in advance and can
//! assert exact figures. Whether an answer is wrong is decided by a hash of the ticket, the
//! model and the figure (department or urgency): deterministic, independent across the two
//! figures, and different per model, so two models at two rates make two comparable versions.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::DEPARTMENTS;

/// The `is_urgent` probability the classifier answers: confident, on the right or wrong side
/// of policy-v1's threshold (0.5).
pub const URGENT_P: f64 = 0.9;
pub const NOT_URGENT_P: f64 = 0.1;

/// One labelled ticket.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub department: String,
    pub is_urgent: bool,
}

/// Labels by ticket, error rates by model.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    labels: HashMap<(String, String), Label>,
    /// The labels' departments, in the order a wrong answer takes the next one: policy-v1's
    /// when the file is in its departments, else the file's own, sorted (a desk's taxonomy).
    departments: Vec<String>,
    default_rate: f64,
    rates: HashMap<String, f64>,
}

impl Classifier {
    /// Reads JSONL rows with `subject`, `message`, `department` and `is_urgent` (other fields
    /// are ignored).
    pub fn from_jsonl(text: &str, error_rate: f64) -> Result<Self, String> {
        let mut labels = HashMap::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let row: Value =
                serde_json::from_str(line).map_err(|e| format!("line {}: {e}", number + 1))?;
            let field = |name: &str| {
                row[name]
                    .as_str()
                    .map(|s| s.trim().to_owned())
                    .ok_or_else(|| format!("line {}: no string {name:?}", number + 1))
            };
            let label = Label {
                department: field("department")?,
                is_urgent: row["is_urgent"]
                    .as_bool()
                    .ok_or_else(|| format!("line {}: no boolean \"is_urgent\"", number + 1))?,
            };
            labels.insert((field("subject")?, field("message")?), label);
        }
        let mut departments: Vec<String> = labels.values().map(|l| l.department.clone()).collect();
        departments.sort();
        departments.dedup();
        if departments
            .iter()
            .all(|d| DEPARTMENTS.contains(&d.as_str()))
        {
            departments = DEPARTMENTS.map(String::from).into();
        }
        Ok(Self {
            labels,
            departments,
            default_rate: error_rate,
            rates: HashMap::new(),
        })
    }

    /// Calls for `model` err at `rate` instead of the default.
    pub fn with_rate(mut self, model: &str, rate: f64) -> Self {
        self.rates.insert(model.to_owned(), rate);
        self
    }

    pub fn rate(&self, model: &str) -> f64 {
        self.rates.get(model).copied().unwrap_or(self.default_rate)
    }

    pub fn label(&self, subject: &str, message: &str) -> Option<&Label> {
        self.labels
            .get(&(subject.trim().to_owned(), message.trim().to_owned()))
    }

    /// The answer for a call whose user message is `ticket_text`, or `None` for a ticket the
    /// file does not label.
    pub fn answer(&self, ticket_text: &str, model: &str) -> Option<Value> {
        let (subject, message) = ticket_of(ticket_text)?;
        let label = self.label(&subject, &message)?;
        let departments = &self.departments;
        let (department, is_urgent) = answered(
            label,
            (&subject, &message),
            model,
            self.rate(model),
            departments,
        );
        let p = if is_urgent { URGENT_P } else { NOT_URGENT_P };
        Some(json!({ "is_urgent": p, "department": department, "urgency_score": p }))
    }
}

/// What the classifier answers for `label` at `rate`: the department after the right one in
/// `departments` (wrapping) when the department draw errs, the other urgency when the urgency
/// draw does. Public so tests can count the errors they expect.
pub fn answered(
    label: &Label,
    (subject, message): (&str, &str),
    model: &str,
    rate: f64,
    departments: &[String],
) -> (String, bool) {
    let department = if errs(subject, message, model, "department", rate) {
        let at = departments
            .iter()
            .position(|d| *d == label.department)
            .unwrap_or(0);
        departments[(at + 1) % departments.len()].to_owned()
    } else {
        label.department.clone()
    };
    let is_urgent = label.is_urgent != errs(subject, message, model, "urgency", rate);
    (department, is_urgent)
}

/// A draw in [0, 1) from FNV-1a of the ticket, the model and the figure, below `rate`.
fn errs(subject: &str, message: &str, model: &str, figure: &str, rate: f64) -> bool {
    let hash = [subject.trim(), message.trim(), model, figure]
        .iter()
        .flat_map(|part| part.bytes().chain([0]))
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    // The top 53 bits as a fraction: FNV's low bits are the weakest.
    ((hash >> 11) as f64 / (1u64 << 53) as f64) < rate
}

/// The subject and message of a user message in either framing: `{"subject", "message"}`
/// (triage-v5 on) or `Subject: …\n\n…` (triage-v3, v4).
fn ticket_of(text: &str) -> Option<(String, String)> {
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) {
        let subject = object.get("subject")?.as_str()?;
        let message = object.get("message")?.as_str()?;
        return Some((subject.to_owned(), message.to_owned()));
    }
    let rest = text.strip_prefix("Subject: ")?;
    let (subject, message) = rest.split_once("\n\n")?;
    Some((subject.to_owned(), message.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = r#"{"id":"1","subject":"Refund","message":" charged twice ","department":"billing","is_urgent":true,"split":"test"}
{"id":"2","subject":"Login","message":"locked out","department":"account","is_urgent":false,"split":"dev"}"#;

    #[test]
    fn at_rate_zero_the_label_is_the_answer_in_either_framing() {
        let c = Classifier::from_jsonl(SET, 0.0).unwrap();
        let json = r#"{"subject":"Refund","message":"charged twice"}"#;
        let answer = c.answer(json, "m").unwrap();
        assert_eq!(answer["department"], "billing");
        assert_eq!(answer["is_urgent"], URGENT_P);
        let plain = c.answer("Subject: Login\n\nlocked out", "m").unwrap();
        assert_eq!(plain["department"], "account");
        assert_eq!(plain["is_urgent"], NOT_URGENT_P);
        assert_eq!(c.answer("Subject: other\n\nx", "m"), None);
    }

    #[test]
    fn at_rate_one_every_answer_is_wrong_and_rates_are_per_model() {
        let c = Classifier::from_jsonl(SET, 1.0)
            .unwrap()
            .with_rate("good", 0.0);
        let wrong = c.answer("Subject: Refund\n\ncharged twice", "bad").unwrap();
        assert_eq!(wrong["department"], "technical");
        assert_eq!(wrong["is_urgent"], NOT_URGENT_P);
        let right = c
            .answer("Subject: Refund\n\ncharged twice", "good")
            .unwrap();
        assert_eq!(right["department"], "billing");
    }

    #[test]
    fn the_error_rate_holds_over_many_tickets() {
        let label = Label {
            department: "general".into(),
            is_urgent: false,
        };
        let departments = DEPARTMENTS.map(String::from);
        let wrong = (0..10_000)
            .filter(|i| {
                let ticket = (format!("s{i}"), "m");
                answered(&label, (&ticket.0, ticket.1), "model", 0.2, &departments).0 != "general"
            })
            .count();
        assert!((1800..2200).contains(&wrong), "{wrong}");
    }

    #[test]
    fn a_desks_labels_are_answered_wrongly_in_its_own_departments() {
        let set = r#"{"subject":"a","message":"x","department":"card_arrival","is_urgent":false}
{"subject":"b","message":"y","department":"age_limit","is_urgent":false}"#;
        let c = Classifier::from_jsonl(set, 1.0).unwrap();
        let wrong = c.answer("Subject: a\n\nx", "m").unwrap();
        assert_eq!(
            wrong["department"], "age_limit",
            "the next of the file's own, sorted"
        );
    }
}
