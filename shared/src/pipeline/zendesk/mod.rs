//! The Zendesk connector's steps (docs/zendesk.md): a created event becomes a ticket owned by
//! the desk principal `zendesk:<account_id>`, in one transaction with its `zendesk_ticket` row
//! (whose key makes Zendesk's retries, and two events for one Zendesk ticket, one ticket) and,
//! when results are written back, the desk's write-back subscription on the delivery outbox.
//! A person's change becomes feedback of the field it changed ([`corrections`], kept until the
//! write-back when it comes first); [`groups`] maps departments to groups and back; [`written`]
//! is what the write-back remembers of what it wrote.
//! Uses ingest and feedback (steps beside it), the taxonomy, and the connector's event types.

pub mod corrections;
pub mod groups;
pub mod written;

use deadpool_postgres::Pool;
use uuid::Uuid;

use crate::{
    config::Limits,
    connectors::zendesk::events::{Kind, TicketEvent},
    db,
    domain::{error::Result, ticket::TicketId, versions::Versions},
    pipeline::ingest::{self, NewTicket, Submitter},
};

/// What the connector needs of the deployment to receive events.
#[derive(Debug, Clone, Copy)]
pub struct Desk<'a> {
    pub pool: &'a Pool,
    pub versions: &'a Versions,
    pub limits: &'a Limits,
    /// Results are written back (`TRIAGE_ZENDESK_URL` is set).
    pub write_back: bool,
}

/// What became of an event (each answered 2xx: Zendesk must not retry any of them).
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    Created(TicketId),
    /// Zendesk's retry, or another event for a ticket already created (or erased).
    AlreadyHere,
    /// A correction, stored as the desk's feedback.
    Corrected,
    /// A correction that arrived before the answer was written back: kept, applied by the
    /// write-back.
    Kept,
    /// Nothing to do, and why (for the log and the answer).
    Ignored(&'static str),
}

/// The principal a Zendesk account's tickets and feedback belong to.
pub fn principal(account_id: i64) -> String {
    format!("zendesk:{account_id}")
}

/// The owner stored for the account's tickets (as `http::Caller::owner` stores a principal).
pub fn owner(account_id: i64) -> String {
    ingest::owner_of(&principal(account_id))
}

const REMEMBER: &str = "INSERT INTO zendesk_ticket (account_id, zendesk_id) VALUES ($1, $2) \
                        ON CONFLICT DO NOTHING RETURNING 1";
const LINK: &str =
    "UPDATE zendesk_ticket SET ticket_id = $3 WHERE account_id = $1 AND zendesk_id = $2";
/// Counts a desk ticket against the desk's daily quota and, past it, delays its job to the
/// first UTC day with room (V42); the day it was placed on.
const PLACE: &str = "SELECT desk_quota_place($1, $2, $3)";
/// The desk's one write-back target (a unique index per desk owner makes it one).
const SUBSCRIBE: &str = "INSERT INTO subscription (id, kind, owner, target) \
                         VALUES ($1, 'zendesk', $2, $3) \
                         ON CONFLICT (owner) WHERE kind = 'zendesk' DO NOTHING";

pub async fn receive(desk: Desk<'_>, event: &TicketEvent) -> Result<Received> {
    match event.kind {
        Kind::Created => create(desk, event).await,
        Kind::GroupChanged | Kind::PriorityChanged => corrections::apply(desk, event).await,
        Kind::Other => Ok(Received::Ignored("not an event the connector acts on")),
    }
}

async fn create(desk: Desk<'_>, event: &TicketEvent) -> Result<Received> {
    let ticket = NewTicket {
        subject: fitted(
            &event.subject,
            desk.limits.max_subject_chars,
            "(no subject)",
        ),
        message: fitted(
            &event.description,
            desk.limits.max_message_chars,
            "(no description)",
        ),
    };
    let owner = owner(event.account_id);
    let mut client = db::client(desk.pool).await?;
    let tx = client.transaction().await?;
    // A concurrent event for the same Zendesk ticket waits here on the key, then finds it.
    let keys: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&event.account_id, &event.ticket];
    if tx.query_opt(REMEMBER, &keys).await?.is_none() {
        return Ok(Received::AlreadyHere);
    }
    if desk.write_back {
        // Before the ticket: a duplicate's existing result is announced by the ticket's own
        // statement, which sees this row.
        tx.execute(
            SUBSCRIBE,
            &[&Uuid::new_v4(), &owner, &event.account_id.to_string()],
        )
        .await?;
    }
    let submitter = Submitter {
        owner: &owner,
        // Never refused: Zendesk does not retry a refusal. The desk's quota delays instead.
        daily_quota: None,
        rate_per_minute: None,
        dedup_hold: desk.limits.dedup_hold,
    };
    let created = ingest::create_ticket_on(&tx, desk.versions, &ticket, submitter).await?;
    if let Some(quota) = desk.limits.desk_daily_tickets {
        let quota = i32::try_from(quota).unwrap_or(i32::MAX);
        tx.execute(PLACE, &[&owner, &quota, &created.id.0]).await?;
    }
    tx.execute(LINK, &[&event.account_id, &event.ticket, &created.id.0])
        .await?;
    tx.commit().await?;
    Ok(Received::Created(created.id))
}

/// A desk's text as a ticket's: NULs dropped, cut at the limit (Zendesk would retry a refusal
/// for hours, and the ticket is the desk's either way), never empty.
fn fitted(text: &str, max_chars: usize, empty: &str) -> String {
    let text: String = text
        .chars()
        .filter(|&c| c != '\0')
        .take(max_chars)
        .collect();
    if text.trim().is_empty() {
        empty.to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_desks_text_is_fitted_to_a_tickets_limits() {
        assert_eq!(fitted("a\0bc", 2, "-"), "ab");
        assert_eq!(fitted("  ", 10, "(no subject)"), "(no subject)");
        assert_eq!(owner(1), ingest::owner_of("zendesk:1"));
    }
}
