//! The departments of `policy-v1`, and the hash answer of
//! [`Behavior::Classify`](crate::Behavior::Classify) chosen from them, or from the departments
//! the request's schema allows (a desk's taxonomy): stable per ticket text.

use serde_json::{json, Value};

/// The departments of `policy-v1`, which [`classify`] chooses from.
pub const DEPARTMENTS: [&str; 5] = ["billing", "technical", "account", "sales", "general"];

/// The answer of [`Behavior::Classify`] to a request under `policy-v1`: a department from
/// [`DEPARTMENTS`] and scores in [0, 1], all derived from a hash of the ticket text, so equal
/// tickets get equal answers.
pub fn classify(ticket_text: &str) -> Value {
    classify_in(ticket_text, &[])
}

/// [`classify`] choosing from `allowed` (the request schema's departments; [`DEPARTMENTS`]
/// when empty).
pub fn classify_in(ticket_text: &str, allowed: &[String]) -> Value {
    // FNV-1a: stable across runs and Rust versions, unlike std's hasher.
    let hash = ticket_text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let urgency_score = (hash >> 8) % 101;
    json!({
        "is_urgent": if urgency_score >= 50 { 0.9 } else { 0.1 },
        "department": match allowed.len() as u64 {
            0 => DEPARTMENTS[(hash % DEPARTMENTS.len() as u64) as usize],
            n => allowed[(hash % n) as usize].as_str(),
        },
        "urgency_score": urgency_score as f64 / 100.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_is_deterministic_and_inside_the_contract() {
        for text in ["", "Subject: a\n\nb", "Subject: refund\n\nplease", "ü"] {
            let answer = classify(text);
            assert_eq!(answer, classify(text));
            let department = answer["department"].as_str().unwrap();
            assert!(DEPARTMENTS.contains(&department));
            for score in ["is_urgent", "urgency_score"] {
                let v = answer[score].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&v), "{score} = {v}");
            }
        }
    }

    #[test]
    fn a_request_under_a_taxonomy_is_answered_in_its_departments() {
        let allowed: Vec<String> = ["returns", "delivery", "payments"].map(String::from).into();
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..60 {
            let answer = classify_in(&format!("ticket {i}"), &allowed);
            let department = answer["department"].as_str().unwrap().to_string();
            assert!(allowed.contains(&department), "{department}");
            seen.insert(department);
        }
        assert_eq!(seen.len(), 3, "every department is answered for some text");
    }
}
