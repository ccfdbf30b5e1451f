//! The offline default: a deterministic keyword classifier, so the whole pipeline runs with
//! no key and no network. Its model version (`rules@offline`) keeps its results apart from
//! any real model's.

use serde_json::json;

use super::{
    EvaluationRequest, FailureKind, ModelOutput, Provider, ProviderError, ProviderReply, Usage,
};

pub struct RulesProvider;

/// First match wins; a department the policy lacks falls through to the next rule.
const DEPARTMENT_RULES: &[(&str, &[&str])] = &[
    (
        "billing",
        &[
            "invoice", "refund", "charge", "charged", "payment", "billing", "card", "cobr",
            "estorno",
        ],
    ),
    (
        "account",
        &[
            "password",
            "login",
            "log in",
            "account",
            "locked out",
            "2fa",
            "sign in",
        ],
    ),
    (
        "technical",
        &[
            "error", "bug", "crash", "down", "outage", "fire", "broken", "slow", "timeout", "500",
        ],
    ),
    (
        "sales",
        &[
            "pricing", "quote", "upgrade", "plan", "demo", "trial", "license",
        ],
    ),
];

const URGENT_WORDS: &[&str] = &[
    "urgent",
    "asap",
    "immediately",
    "down",
    "outage",
    "fire",
    "data loss",
    "security",
    "breach",
    "urgente",
    "!",
];

impl Provider for RulesProvider {
    fn name(&self) -> &'static str {
        "rules"
    }

    async fn evaluate(
        &self,
        request: EvaluationRequest<'_>,
    ) -> Result<ProviderReply, ProviderError> {
        // Its keywords are the built-in desk's: under a stored taxonomy it would only answer
        // departments the desk does not have.
        if request.policy.taxonomy.is_some() {
            return Err(ProviderError::new(
                FailureKind::InvalidRequest,
                "the offline rules know only the built-in policy-v1: a stored taxonomy needs a \
                 model (docs/taxonomy.md)",
            ));
        }
        let text = format!("{} {}", request.subject, request.message).to_lowercase();
        let department = DEPARTMENT_RULES
            .iter()
            .filter(|(dept, _)| request.policy.departments.iter().any(|d| d == dept))
            .find(|(_, words)| words.iter().any(|w| text.contains(w)))
            .map(|(dept, _)| *dept)
            .unwrap_or("general");
        let hits = URGENT_WORDS.iter().filter(|w| text.contains(*w)).count() as f64;
        let urgency_score = (0.2 + 0.25 * hits).min(1.0);
        let is_urgent = if urgency_score >= request.policy.urgent_threshold {
            0.9
        } else {
            0.1
        };
        Ok(ProviderReply {
            output: ModelOutput::Json(json!({
                "is_urgent": is_urgent,
                "department": department,
                "urgency_score": urgency_score,
            })),
            usage: Usage::default(),
            http_status: 200,
            rate: Default::default(),
            confidence: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        domain::{taxonomy::Taxonomy, versions::ModelVersion},
        providers::{Policy, Prompt, Tier},
    };

    #[tokio::test]
    async fn a_stored_taxonomy_is_refused_not_answered_in_the_built_in_departments() {
        let file = serde_json::json!({"name": "shop", "departments": [
            {"name": "returns", "description": "Sending an order back."},
            {"name": "delivery", "description": "Where an order is."}],
            "urgent": "Cannot pay.", "urgent_threshold": 0.5});
        let policy = Policy::of_taxonomy(Taxonomy::parse(file.to_string().as_bytes()).unwrap());
        let prompt = Prompt::load("triage-v5", &policy).unwrap();
        let model = ModelVersion::rules();
        let request = EvaluationRequest {
            subject: "Refund",
            message: "I was charged twice",
            prompt: &prompt,
            model: &model,
            policy: &policy,
            timeout: Duration::from_secs(1),
            tier: Tier::Online,
        };
        let error = RulesProvider.evaluate(request).await.unwrap_err();
        assert_eq!(error.kind, FailureKind::InvalidRequest);
        assert!(error.to_string().contains("policy-v1"), "{error}");
    }
}
