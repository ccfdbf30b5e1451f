//! `GET /tickets/{id}/feedback`: a ticket's labels, newest first, each with where it came
//! from (issue 49, item 1): `source` (`desk`: an API labeller or a desk connector's human
//! actor; the column admits `audit` and `model` for the labels a set built from production
//! derives), whether its giver may label (it trains and judges) and whether it is current.
//! Who gave it is not shown: another principal's identity is not the ticket reader's to see.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::domain::{error::Result, ticket::TicketId};

/// One label as the history shows it. A label may name one field only (a desk's change of the
/// group labels the department, of the priority the urgency): the other is then absent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Label {
    pub department: Option<String>,
    pub is_urgent: Option<bool>,
    pub given_at: DateTime<Utc>,
    pub source: String,
    pub labeller: bool,
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub ticket_id: TicketId,
    pub labels: Vec<Label>,
}

/// The ticket, if it is a production ticket `$2` may read (`NULL`: any).
const TICKET: &str = "SELECT 1 FROM ticket WHERE id = $1 AND workload = 'production' \
                      AND ($2::text IS NULL OR owner = $2)";

const LABELS: &str = "SELECT department, is_urgent, created_at, source, labeller, \
                      superseded_at IS NULL FROM ticket_feedback \
                      WHERE ticket_id = $1 ORDER BY id DESC";

/// `id`'s labels, if `owner` may read it (`None`: any caller).
pub async fn history(
    client: &impl GenericClient,
    id: TicketId,
    owner: Option<&str>,
) -> Result<Option<History>> {
    if client.query_opt(TICKET, &[&id.0, &owner]).await?.is_none() {
        return Ok(None);
    }
    let rows = client.query(LABELS, &[&id.0]).await?;
    let labels = rows
        .iter()
        .map(|row| Label {
            department: row.get(0),
            is_urgent: row.get(1),
            given_at: row.get(2),
            source: row.get(3),
            labeller: row.get(4),
            current: row.get(5),
        })
        .collect();
    Ok(Some(History {
        ticket_id: id,
        labels,
    }))
}
