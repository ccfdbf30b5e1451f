//! The evaluation outbox: claim (article step 3) and the four fenced ways a claimed job ends
//! its turn — finish, reschedule, release, dead letter. Every write after the claim names the
//! claim token; a worker whose lease expired and was re-claimed changes nothing.

pub mod claim;
pub mod dead_letter;
pub mod finish;
pub mod reschedule;

use uuid::Uuid;

use crate::{key::IdempotencyKey, ticket::TicketId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutboxId(pub i64);

/// A claimed job, with what the provider needs to evaluate it.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: OutboxId,
    pub ticket_id: TicketId,
    pub key: IdempotencyKey,
    pub prompt_version: String,
    pub model_version: String,
    /// Attempts including this one (the claim counts it).
    pub attempts: i32,
    pub claim_token: Uuid,
    pub subject: String,
    pub message: String,
}

/// Whether a fenced write still held the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Fencing {
    Held,
    /// The lease expired and the job was returned or re-claimed: nothing was written.
    Lost,
}

impl Fencing {
    fn from_rows(rows: u64) -> Self {
        if rows == 1 {
            Fencing::Held
        } else {
            Fencing::Lost
        }
    }
}

/// `last_error` is bounded, as in the article.
fn bounded(error: &str) -> String {
    error.chars().take(500).collect()
}
