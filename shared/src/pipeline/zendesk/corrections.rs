//! An agent's change as the desk's feedback (docs/zendesk.md, "What counts as a correction"):
//! a group or priority change on a ticket the connector created, made by a person (never the
//! connector's own API user, nor a trigger, an automation or the system: Zendesk's actor `-1`),
//! is stored through `feedback::give`, as `POST /tickets/{id}/feedback` stores it, given by
//! `zendesk:<account_id>:<actor_id>` on the desk principal's ticket. It labels only the field it
//! changed: a group change the department (the group mapped back through the taxonomy the
//! answer was made under; a group no department has, or several share, is no label), a
//! priority change urgency (Zendesk's `urgent`). Changes apply in the order of their event time:
//! one older than the field's last applied change, arriving later, changes nothing. A change
//! that arrives before triage's answer is written back is kept (`zendesk_correction`) and
//! applied by the write-back once it has written ([`apply_kept`]). Events for an erased ticket,
//! and each event's retries, change nothing.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};

use super::{
    groups::{Back, Mapping},
    owner, principal, written, Desk, Received,
};
use crate::{
    connectors::zendesk::events::{Kind, TicketEvent},
    db,
    domain::{error::Result, ticket::TicketId},
    pipeline::feedback::{self, Fields},
};

const TICKET: &str = "SELECT ticket_id, written_at IS NOT NULL, group_changed_at, \
                      priority_changed_at FROM zendesk_ticket \
                      WHERE account_id = $1 AND zendesk_id = $2";

/// The policy the ticket was first answered under (the answer written back).
const POLICY: &str = r#"
SELECT r.policy_version
FROM ticket_evaluation te JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
WHERE te.ticket_id = $1
ORDER BY te.created_at
LIMIT 1
"#;

const SEEN: &str = "SELECT 1 FROM zendesk_event WHERE id = $1";
const APPLIED: &str = "INSERT INTO zendesk_event (id) VALUES ($1) ON CONFLICT DO NOTHING";

/// The field's last applied change moves to `$3` (never back).
const GROUP_CHANGED: &str = "UPDATE zendesk_ticket \
     SET group_changed_at = greatest(group_changed_at, $3) \
     WHERE account_id = $1 AND zendesk_id = $2";
const PRIORITY_CHANGED: &str = "UPDATE zendesk_ticket \
     SET priority_changed_at = greatest(priority_changed_at, $3) \
     WHERE account_id = $1 AND zendesk_id = $2";

const KEEP: &str = "INSERT INTO zendesk_correction \
     (event_id, account_id, zendesk_id, kind, actor_id, group_id, priority, event_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING";

const KEPT: &str = "SELECT event_id, kind, actor_id, group_id, priority, event_at \
     FROM zendesk_correction WHERE account_id = $1 AND zendesk_id = $2 \
     ORDER BY event_at, received_at";

const DONE: &str = "DELETE FROM zendesk_correction WHERE event_id = $1";

/// A change event received from Zendesk.
pub async fn apply(desk: Desk<'_>, event: &TicketEvent) -> Result<Received> {
    change(desk.pool, desk.limits.feedback_history, event).await
}

/// Applies the corrections kept for a Zendesk ticket, in event time order, once its answer is
/// written back; `history` is `Limits::feedback_history`. Each is removed once applied (a
/// crash in between applies it again: the same labels, and its event is seen once).
pub async fn apply_kept(
    pool: &Pool,
    history: usize,
    account_id: i64,
    zendesk_id: i64,
) -> Result<()> {
    let client = db::client(pool).await?;
    for row in client.query(KEPT, &[&account_id, &zendesk_id]).await? {
        let (event_id, kind): (String, String) = (row.get(0), row.get(1));
        let event = TicketEvent {
            kind: if kind == "group" {
                Kind::GroupChanged
            } else {
                Kind::PriorityChanged
            },
            event_id,
            account_id,
            ticket: zendesk_id,
            actor: Some(row.get(2)),
            at: row.get(5),
            subject: String::new(),
            description: String::new(),
            group_id: row.get(3),
            priority: row.get(4),
        };
        change(pool, history, &event).await?;
        client.execute(DONE, &[&event.event_id]).await?;
    }
    Ok(())
}

async fn change(pool: &Pool, history: usize, event: &TicketEvent) -> Result<Received> {
    let client = db::client(pool).await?;
    let Some(row) = client
        .query_opt(TICKET, &[&event.account_id, &event.ticket])
        .await?
    else {
        return Ok(Received::Ignored("not a ticket the connector created"));
    };
    let Some(ticket) = row.get::<_, Option<uuid::Uuid>>(0) else {
        return Ok(Received::Ignored("the ticket was erased in triage"));
    };
    let Some(actor) = event.actor else {
        return Ok(Received::Ignored(
            "not a person's change (a trigger, an automation or the system)",
        ));
    };
    // Known before the connector's first update (the write-back asks first), so its own
    // changes' events are told apart even when they arrive before the write is recorded.
    if written::api_user(&client, event.account_id).await? == Some(actor) {
        return Ok(Received::Ignored("the connector's own update"));
    }
    if client.query_opt(SEEN, &[&event.event_id]).await?.is_some() {
        return Ok(Received::AlreadyHere);
    }
    if !row.get::<_, bool>(1) {
        keep(&client, event, actor).await?;
        return Ok(Received::Kept);
    }
    let (group_at, priority_at): (Option<DateTime<Utc>>, Option<DateTime<Utc>>) =
        (row.get(2), row.get(3));
    let (last, stamp) = match event.kind {
        Kind::GroupChanged => (group_at, GROUP_CHANGED),
        _ => (priority_at, PRIORITY_CHANGED),
    };
    if last.is_some_and(|last| event.at < last) {
        applied(&client, &event.event_id).await?;
        return Ok(Received::Ignored("older than a change already applied"));
    }
    let Some(policy) = client.query_opt(POLICY, &[&ticket]).await? else {
        return Ok(Received::Ignored("triage has not answered the ticket yet"));
    };
    let mapping = Mapping::of(&client, policy.get(0)).await?;
    let received = match labels(event, &mapping) {
        Ok(fields) => {
            let desk_owner = owner(event.account_id);
            let given_by = format!("{}:{actor}", principal(event.account_id));
            let giver = feedback::Giver {
                owner: Some(&desk_owner),
                given_by: &given_by,
                urgent_threshold: mapping.urgent_threshold,
                history,
                // The desk's agents: their corrections are the labels (docs/labelling.md).
                labeller: true,
            };
            match feedback::give(pool, TicketId(ticket), &fields, giver).await? {
                Some(_) => Received::Corrected,
                None => Received::Ignored("the ticket was erased in triage"),
            }
        }
        Err(why) => Received::Ignored(why),
    };
    // After the feedback: a crash in between has Zendesk retry, which stores the same labels.
    client
        .execute(stamp, &[&event.account_id, &event.ticket, &event.at])
        .await?;
    applied(&client, &event.event_id).await?;
    Ok(received)
}

/// The one field the event labels, or why it labels none.
fn labels(event: &TicketEvent, mapping: &Mapping) -> std::result::Result<Fields, &'static str> {
    match event.kind {
        Kind::GroupChanged => match event.group_id.map(|g| mapping.department_of(g)) {
            Some(Back::One(department)) => Ok(Fields {
                department: Some(department.to_string()),
                is_urgent: None,
            }),
            Some(Back::Shared) => {
                Err("the group is shared by several departments: no department label")
            }
            Some(Back::None) | None => Err("the group maps to no department"),
        },
        _ => Ok(Fields {
            department: None,
            is_urgent: Some(event.priority.as_deref() == Some("urgent")),
        }),
    }
}

async fn keep(client: &impl GenericClient, event: &TicketEvent, actor: i64) -> Result<()> {
    let kind = match event.kind {
        Kind::GroupChanged => "group",
        _ => "priority",
    };
    client
        .execute(
            KEEP,
            &[
                &event.event_id,
                &event.account_id,
                &event.ticket,
                &kind,
                &actor,
                &event.group_id,
                &event.priority,
                &event.at,
            ],
        )
        .await?;
    Ok(())
}

async fn applied(client: &impl GenericClient, event_id: &str) -> Result<()> {
    client.execute(APPLIED, &[&event_id]).await?;
    Ok(())
}
