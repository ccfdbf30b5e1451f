//! The cascade (docs/cascade.md): a model version `cascade(LOCAL,THRESHOLD,MODEL@EFFORT)`
//! whose first stage is a local classifier the project trained. It answers a job when its
//! confidence is at least the threshold (no call, nothing paid, no ledger row); otherwise the
//! large model is called as for any version. [`models`] stores and loads the classifiers,
//! [`examples`] reads what trains them from the database into a [`gather`]ing (one example
//! per text, within a budget in bytes) under the [`caps`] on owners and givers, a lone giver's contradicting label [`hold`]-ed, [`trained_on`] records which tickets did (for
//! erasure's report), [`provisional`] gives new tickets the local answer
//! while the large model cannot be asked now, [`switch`] keeps a configured cascade on the
//! classifier a retrain switched to, [`audit`] sends a random share of would-be-local answers
//! to the large model too (the live classifier's unbiased precision), and [`suspension`]
//! stops a cascade whose audited precision fell below its target.

pub mod audit;
pub mod caps;
pub mod examples;
pub mod gather;
pub mod hold;
pub mod models;
pub mod provisional;
pub mod suspension;
pub mod switch;
pub mod targets;
pub mod trained_on;

use std::sync::Arc;

use crate::providers::{
    classifier::{LocalModel, LocalProvider},
    contract, AnsweredBy, Evaluation, EvaluationRequest, Provider,
};

/// What the local classifier says of one ticket, held to the contract like any provider's.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalAnswer {
    pub evaluation: Evaluation,
    /// How sure it is of the whole answer (calibrated).
    pub confidence: f64,
}

/// Asks the local classifier through the providers' own trait (it is one more provider); an
/// answer outside the contract (a department the policy lacks) is no answer.
pub async fn ask(model: Arc<LocalModel>, request: EvaluationRequest<'_>) -> Option<LocalAnswer> {
    let reply = LocalProvider { model }.evaluate(request).await.ok()?;
    let mut evaluation = contract::validate(&reply.output, request.policy).ok()?;
    evaluation.answered_by = AnsweredBy::Local;
    Some(LocalAnswer {
        evaluation,
        confidence: reply.confidence.unwrap_or(0.0),
    })
}
