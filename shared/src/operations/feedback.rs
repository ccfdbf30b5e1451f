//! `triage feedback --items` (the ops Lambda's `feedback`): the help desk's labels for many
//! tickets at once, each stored as `POST /tickets/{id}/feedback` stores it, all checked first.

use std::str::FromStr;

use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};

use super::{audit::Operator, checks::within, Outcome};
use crate::{
    config::Config,
    domain::{
        error::{InvalidRequest, Result},
        ticket::TicketId,
    },
    pipeline::feedback,
    providers::Policy,
};

/// Most tickets one `feedback` batch labels.
pub const MAX_FEEDBACK_ITEMS: i64 = 1000;

/// One ticket's labels in a feedback batch.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackItem {
    pub ticket_id: TicketId,
    pub department: String,
    pub is_urgent: bool,
}

/// A feedback batch: a JSON array in the ops payload, the same array as the CLI's `--items`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackItems(pub Vec<FeedbackItem>);

impl From<Vec<FeedbackItem>> for FeedbackItems {
    fn from(items: Vec<FeedbackItem>) -> Self {
        Self(items)
    }
}

impl From<FeedbackItems> for Vec<FeedbackItem> {
    fn from(items: FeedbackItems) -> Self {
        items.0
    }
}

impl FromStr for FeedbackItems {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        serde_json::from_str(s)
            .map(Self)
            .map_err(|e| InvalidRequest::new("items", format!("not a JSON list of feedback: {e}")))
    }
}

/// Stores each item's labels under `policy`'s departments; a bad item refuses the batch before
/// any is stored.
pub(super) async fn give_batch(
    pool: &Pool,
    config: &Config,
    policy: &Policy,
    items: Vec<FeedbackItem>,
    operator: &Operator,
) -> Result<Outcome> {
    within("items", items.len() as i64, MAX_FEEDBACK_ITEMS)?;
    if let Some(bad) = items
        .iter()
        .find(|i| !policy.departments.contains(&i.department))
    {
        return Err(InvalidRequest::new(
            "department",
            format!(
                "{:?} is not one of {}",
                bad.department,
                policy.departments.join(", ")
            ),
        )
        .into());
    }
    let (mut given, mut not_found) = (Vec::new(), Vec::new());
    for item in items {
        let labels = feedback::Labels {
            department: item.department,
            is_urgent: item.is_urgent,
        };
        let giver = feedback::Giver {
            owner: None,
            given_by: operator.as_str(),
            urgent_threshold: policy.urgent_threshold,
            history: config.limits.feedback_history,
            // An operator's batch is the desk's, as its audit records (docs/labelling.md).
            labeller: true,
        };
        match feedback::give(pool, item.ticket_id, &(&labels).into(), giver).await? {
            Some(stored) => given.push(stored),
            None => not_found.push(item.ticket_id),
        }
    }
    Ok(Outcome::Feedback { given, not_found })
}
