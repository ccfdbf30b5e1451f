//! Versioned prompts and policies, embedded from `prompts/` at build time so the binary
//! carries the exact text its keys stand for.

use serde::Deserialize;

/// A prompt version and its text (with the policy's departments filled in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub version: String,
    pub text: String,
}

const PROMPTS: &[(&str, &str)] = &[
    ("triage-v3", include_str!("../../../prompts/triage-v3.txt")),
    ("triage-v4", include_str!("../../../prompts/triage-v4.txt")),
];

const POLICIES: &[(&str, &str)] = &[("policy-v1", include_str!("../../../prompts/policy-v1.json"))];

impl Prompt {
    /// The prompt of `version` for `policy`, or `None` when this build does not know it.
    pub fn load(version: &str, policy: &Policy) -> Option<Self> {
        let (_, template) = PROMPTS.iter().find(|(v, _)| *v == version)?;
        let departments = policy
            .departments
            .iter()
            .map(|d| format!("\"{d}\""))
            .collect::<Vec<_>>()
            .join(", ");
        Some(Self {
            version: version.to_string(),
            text: template.replace("{departments}", &departments),
        })
    }

    pub fn known_versions() -> impl Iterator<Item = &'static str> {
        PROMPTS.iter().map(|(v, _)| *v)
    }
}

/// What counts as a valid answer: the department list and the urgency threshold.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Policy {
    #[serde(skip)]
    pub version: String,
    pub departments: Vec<String>,
    /// `is_urgent` at or above this is reported urgent by dashboards.
    pub urgent_threshold: f64,
}

impl Policy {
    pub fn load(version: &str) -> Option<Self> {
        let (_, raw) = POLICIES.iter().find(|(v, _)| *v == version)?;
        let mut policy: Policy = serde_json::from_str(raw).expect("embedded policy is valid JSON");
        policy.version = version.to_string();
        Some(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_prompt_loads_under_the_default_policy() {
        let policy = Policy::load("policy-v1").unwrap();
        assert_eq!(
            policy.departments,
            ["billing", "technical", "account", "sales", "general"]
        );
        for version in Prompt::known_versions() {
            let prompt = Prompt::load(version, &policy).unwrap();
            assert!(
                prompt.text.contains("\"billing\", \"technical\""),
                "{version}"
            );
            assert!(!prompt.text.contains("{departments}"));
        }
        assert!(Prompt::load("triage-v0", &policy).is_none());
    }
}
