//! Zendesk's ticket events as its webhooks send them ("Ticket events",
//! developer.zendesk.com/api-reference/webhooks/event-types/ticket-events/): `{"type",
//! "account_id", "id", "time", "subject": "zen:ticket:<id>", "detail": {the ticket: "id",
//! "subject", "description", "group_id", "priority", "tags", "actor_id", ...}, "event": {what
//! changed: "current", "previous"}}`. Ids come as strings (`"35436"`) or numbers, and `"0"`
//! or null is "none"; both are read. Unknown fields are Zendesk's to add and are ignored.
//! An actor that is no user (`-1` for triggers, automations and SLA rules, `system`, none) is
//! read as no actor.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

pub const CREATED: &str = "zen:event-type:ticket.created";
pub const GROUP_CHANGED: &str = "zen:event-type:ticket.group_assignment_changed";
pub const PRIORITY_CHANGED: &str = "zen:event-type:ticket.priority_changed";

/// What the connector does with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Created,
    GroupChanged,
    PriorityChanged,
    /// Any other event the webhook is subscribed to: acknowledged, nothing done.
    Other,
}

/// One event, read.
#[derive(Debug, Clone, PartialEq)]
pub struct TicketEvent {
    pub kind: Kind,
    /// The event's own id: Zendesk's retries carry the same.
    pub event_id: String,
    pub account_id: i64,
    pub ticket: i64,
    /// Who made the change (`detail.actor_id`); `None`: no user (a trigger, an automation, the
    /// system).
    pub actor: Option<i64>,
    /// When it happened in Zendesk (`time`): the order changes apply in, whatever the arrival.
    pub at: DateTime<Utc>,
    pub subject: String,
    pub description: String,
    /// The ticket's group and priority after the event (`event.current` for a change).
    pub group_id: Option<i64>,
    /// Lower case, as the Tickets API spells it (`urgent`, `high`, `normal`, `low`).
    pub priority: Option<String>,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    account_id: Value,
    id: String,
    #[serde(default)]
    time: Option<String>,
    detail: Detail,
    #[serde(default)]
    event: Value,
}

#[derive(Deserialize)]
struct Detail {
    id: Value,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    group_id: Value,
    #[serde(default)]
    priority: Value,
    #[serde(default)]
    actor_id: Value,
}

/// An id as Zendesk sends it: a number or a string of digits; zero, empty or null is none.
fn id(value: &Value) -> Option<i64> {
    let id = match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        // A group change's `current` is the group (`{"id", "name"}`).
        Value::Object(map) => map.get("id").and_then(id),
        _ => None,
    };
    id.filter(|&id| id > 0)
}

fn priority(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_ascii_lowercase()),
        _ => None,
    }
}

/// Reads a body; the error names what is missing or malformed.
pub fn parse(body: &[u8]) -> Result<TicketEvent, String> {
    let envelope: Envelope =
        serde_json::from_slice(body).map_err(|e| format!("not a Zendesk event: {e}"))?;
    let account_id = id(&envelope.account_id).ok_or("account_id is not an id")?;
    let ticket = id(&envelope.detail.id).ok_or("detail.id is not a ticket id")?;
    let kind = match envelope.kind.as_str() {
        CREATED => Kind::Created,
        GROUP_CHANGED => Kind::GroupChanged,
        PRIORITY_CHANGED => Kind::PriorityChanged,
        _ => Kind::Other,
    };
    let at = envelope
        .time
        .as_deref()
        .and_then(|time| DateTime::parse_from_rfc3339(time).ok())
        .ok_or("time is not an RFC 3339 time")?
        .with_timezone(&Utc);
    let current = envelope.event.get("current").unwrap_or(&Value::Null);
    let detail = &envelope.detail;
    let group_id = match kind {
        Kind::GroupChanged => id(current),
        _ => id(&detail.group_id),
    };
    let priority = match kind {
        Kind::PriorityChanged => priority(current),
        _ => priority(&detail.priority),
    };
    Ok(TicketEvent {
        kind,
        event_id: envelope.id,
        account_id,
        ticket,
        actor: id(&detail.actor_id),
        at,
        subject: detail.subject.clone().unwrap_or_default(),
        description: detail.description.clone().unwrap_or_default(),
        group_id,
        priority,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_read_as_zendesk_sends_them() {
        let created = json!({
            "type": CREATED, "account_id": 88888888, "id": "01HN-1",
            "time": "2024-04-17T17:18:10Z", "zendesk_event_version": "2022-11-06",
            "subject": "zen:ticket:35436",
            "detail": {"id": "35436", "subject": "Card declined", "description": "Twice.",
                       "group_id": "0", "priority": "NORMAL", "tags": [], "actor_id": "-1",
                       "via": {"channel": "web"}},
            "event": {}
        });
        let event = parse(created.to_string().as_bytes()).unwrap();
        assert_eq!(event.kind, Kind::Created);
        assert_eq!((event.account_id, event.ticket), (88888888, 35436));
        assert_eq!((event.group_id, event.actor), (None, None));
        assert_eq!(event.priority.as_deref(), Some("normal"));
        let regrouped = json!({
            "type": GROUP_CHANGED, "account_id": "88888888", "id": "01HN-2",
            "time": "2024-04-17T17:20:00+02:00",
            "detail": {"id": 35436, "group_id": "360002", "actor_id": "901"},
            "event": {"current": {"id": "360002", "name": "Billing"}, "previous": null}
        });
        let event = parse(regrouped.to_string().as_bytes()).unwrap();
        assert_eq!(
            (event.kind, event.group_id, event.actor),
            (Kind::GroupChanged, Some(360002), Some(901))
        );
        assert_eq!(event.at.to_rfc3339(), "2024-04-17T15:20:00+00:00", "in UTC");
        let mut by_trigger = regrouped.clone();
        for actor in [json!("-1"), json!("system"), json!(null)] {
            by_trigger["detail"]["actor_id"] = actor;
            let event = parse(by_trigger.to_string().as_bytes()).unwrap();
            assert_eq!(event.actor, None, "no user");
        }
        let mut untimed = regrouped.clone();
        untimed.as_object_mut().unwrap().remove("time");
        assert!(parse(untimed.to_string().as_bytes())
            .unwrap_err()
            .contains("time"));
        assert!(parse(br#"{"type": "x", "id": "1", "detail": {"id": "1"}}"#)
            .unwrap_err()
            .contains("account_id"));
    }
}
