//! What the write-back remembers per Zendesk ticket (`zendesk_ticket`, V32): what it wrote
//! last, so a final answer replaces a provisional one's group and priority but never an
//! agent's, and so the corrections can tell its own updates from an agent's. And who the
//! connector's API user is, per account (`zendesk_account`).

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::domain::error::Result;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    pub account_id: i64,
    pub zendesk_id: i64,
    pub group_id: Option<i64>,
    /// The ticket's priority once our last update applied (`None`: empty): what we left,
    /// set by us or not. An agent's change since makes it differ.
    pub priority: Option<String>,
    /// We made the ticket `urgent` ourselves, from `priority_before` (`None`: empty).
    pub priority_raised: bool,
    pub priority_before: Option<String>,
    pub tags: Vec<String>,
    /// `None`: nothing written yet.
    pub at: Option<DateTime<Utc>>,
}

/// The Zendesk ticket of triage ticket `ticket`, if it came from Zendesk.
pub async fn of_ticket(client: &impl GenericClient, ticket: Uuid) -> Result<Option<Written>> {
    let row = client
        .query_opt(
            "SELECT account_id, zendesk_id, written_group_id, written_priority, priority_before,
                    written_tags, written_at, priority_raised
             FROM zendesk_ticket WHERE ticket_id = $1",
            &[&ticket],
        )
        .await?;
    Ok(row.map(|row| Written {
        account_id: row.get(0),
        zendesk_id: row.get(1),
        group_id: row.get(2),
        priority: row.get(3),
        priority_before: row.get(4),
        tags: row.get(5),
        at: row.get(6),
        priority_raised: row.get(7),
    }))
}

pub async fn record(client: &impl GenericClient, written: &Written) -> Result<()> {
    client
        .execute(
            "UPDATE zendesk_ticket
             SET written_group_id = $3, written_priority = $4, priority_before = $5,
                 written_tags = $6, priority_raised = $7, written_at = now()
             WHERE account_id = $1 AND zendesk_id = $2",
            &[
                &written.account_id,
                &written.zendesk_id,
                &written.group_id,
                &written.priority,
                &written.priority_before,
                &written.tags,
                &written.priority_raised,
            ],
        )
        .await?;
    Ok(())
}

/// A safe update Zendesk refused (409): counted per ticket for operators (docs/zendesk.md).
pub async fn conflicted(
    client: &impl GenericClient,
    account_id: i64,
    zendesk_id: i64,
) -> Result<()> {
    client
        .execute(
            "UPDATE zendesk_ticket SET conflicts = conflicts + 1 WHERE account_id = $1 AND zendesk_id = $2",
            &[&account_id, &zendesk_id],
        )
        .await?;
    Ok(())
}

pub async fn api_user(client: &impl GenericClient, account_id: i64) -> Result<Option<i64>> {
    Ok(client
        .query_opt(
            "SELECT api_user_id FROM zendesk_account WHERE account_id = $1",
            &[&account_id],
        )
        .await?
        .map(|row| row.get(0)))
}

pub async fn set_api_user(client: &impl GenericClient, account_id: i64, user: i64) -> Result<()> {
    client
        .execute(
            "INSERT INTO zendesk_account (account_id, api_user_id) VALUES ($1, $2)
             ON CONFLICT (account_id) DO UPDATE SET api_user_id = $2, updated_at = now()
             WHERE zendesk_account.api_user_id <> $2",
            &[&account_id, &user],
        )
        .await?;
    Ok(())
}
