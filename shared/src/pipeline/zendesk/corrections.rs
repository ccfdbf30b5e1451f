//! An agent's change as the desk's feedback (docs/zendesk.md, "What counts as a correction"):
//! a group or priority change on a ticket triage answered and wrote back, made by anyone but
//! the connector's own API user, is stored through `feedback::give`, exactly as
//! `POST /tickets/{id}/feedback` stores it, from the desk principal. The department is the
//! new group mapped back through the taxonomy the answer was made under (a group no
//! department has is no label: ignored); urgent is Zendesk's priority `urgent`. A priority
//! change keeps the department of the ticket's group, or else of the desk's earlier label,
//! or else of the answer. Events for an erased ticket, and each event's retries, change
//! nothing.

use deadpool_postgres::GenericClient;

use super::{groups::Mapping, owner, written, Desk, Received};
use crate::{
    connectors::zendesk::events::{Kind, TicketEvent},
    db,
    domain::{error::Result, ticket::TicketId},
    pipeline::feedback::{self, Labels},
};

const TICKET: &str =
    "SELECT ticket_id, written_at IS NOT NULL, written_group_id, written_priority \
                      FROM zendesk_ticket WHERE account_id = $1 AND zendesk_id = $2";

/// The answer the ticket was first given (the one written back), and the desk's current label.
const ANSWER: &str = r#"
SELECT r.department, r.policy_version,
       (SELECT department FROM ticket_feedback
        WHERE ticket_id = $1 AND superseded_at IS NULL AND labeller)
FROM ticket_evaluation te JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
WHERE te.ticket_id = $1
ORDER BY te.created_at
LIMIT 1
"#;

const SEEN: &str = "SELECT 1 FROM zendesk_event WHERE id = $1";
const APPLIED: &str = "INSERT INTO zendesk_event (id) VALUES ($1) ON CONFLICT DO NOTHING";

pub async fn apply(desk: Desk<'_>, event: &TicketEvent) -> Result<Received> {
    let client = db::client(desk.pool).await?;
    let Some(row) = client
        .query_opt(TICKET, &[&event.account_id, &event.ticket])
        .await?
    else {
        return Ok(Received::Ignored("not a ticket the connector created"));
    };
    let Some(ticket) = row.get::<_, Option<uuid::Uuid>>(0) else {
        return Ok(Received::Ignored("the ticket was erased in triage"));
    };
    if !row.get::<_, bool>(1) {
        return Ok(Received::Ignored("triage has not answered the ticket yet"));
    }
    let (ours_group, ours_priority): (Option<i64>, Option<String>) = (row.get(2), row.get(3));
    let api_user = written::api_user(&client, event.account_id).await?;
    let own = match (api_user, event.actor) {
        (Some(user), Some(actor)) => user == actor,
        // Who we are is not known yet (no write-back finished): a change to exactly what we
        // wrote is taken for ours rather than risk a loop.
        _ => match event.kind {
            Kind::GroupChanged => event.group_id.is_some() && event.group_id == ours_group,
            _ => event.priority.is_some() && event.priority == ours_priority,
        },
    };
    if own {
        return Ok(Received::Ignored("the connector's own update"));
    }
    if client.query_opt(SEEN, &[&event.event_id]).await?.is_some() {
        return Ok(Received::AlreadyHere);
    }
    let Some(answer) = client.query_opt(ANSWER, &[&ticket]).await? else {
        return Ok(Received::Ignored("triage has not answered the ticket yet"));
    };
    let (answered, policy_version, labelled): (String, String, Option<String>) =
        (answer.get(0), answer.get(1), answer.get(2));
    let mapping = Mapping::of(&client, &policy_version).await?;
    let mapped = event.group_id.and_then(|g| mapping.department_of(g));
    let department = match (event.kind, mapped) {
        (_, Some(department)) => department.to_string(),
        (Kind::GroupChanged, None) => {
            return Ok(Received::Ignored("the group maps to no department"))
        }
        _ => labelled.unwrap_or(answered),
    };
    let labels = Labels {
        department,
        is_urgent: event.priority.as_deref() == Some("urgent"),
    };
    let desk_owner = owner(event.account_id);
    let giver = feedback::Giver {
        owner: Some(&desk_owner),
        given_by: &desk_owner,
        urgent_threshold: mapping.urgent_threshold,
        history: desk.limits.feedback_history,
        // The desk's agents: their corrections are the labels (docs/labelling.md).
        labeller: true,
    };
    if feedback::give(desk.pool, TicketId(ticket), &labels, giver)
        .await?
        .is_none()
    {
        return Ok(Received::Ignored("the ticket was erased in triage"));
    }
    // After the feedback: a crash in between has Zendesk retry, which stores the same labels.
    applied(&client, &event.event_id).await?;
    Ok(Received::Corrected)
}

async fn applied(client: &impl GenericClient, event_id: &str) -> Result<()> {
    client.execute(APPLIED, &[&event_id]).await?;
    Ok(())
}
