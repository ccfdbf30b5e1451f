//! The delivery queue's claim and a claimed delivery's fenced writes. The lease, the fence,
//! the reschedule and the expired-lease sweep are the evaluation outbox's
//! (`outbox::lease`); what is particular here is the claim's bound per endpoint and that a
//! delivery's outcome also tells its endpoint's health.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use uuid::Uuid;

use crate::{
    domain::error::Result,
    pipeline::outbox::{
        lease::{bounded, take_lease, Lease, Queue},
        Fencing,
    },
};

/// What endpoint `s` may still have in flight: `$per_endpoint` (a bus, that many batches of
/// ten) less those in flight under a live lease. The claim and the deliverers' backlog both
/// bound by it. A lease past its time is no delivery in flight (its deliverer died, or it
/// would have written its outcome): counting it held the endpoint's whole allowance for a dead
/// deliverer until the sweeper's next tick returned its rows.
macro_rules! room {
    ($per_endpoint:literal) => {
        concat!(
            "greatest(",
            $per_endpoint,
            r#"::bigint * (CASE WHEN s.kind = 'eventbridge' THEN 10 ELSE 1 END)
                   - (SELECT count(*) FROM delivery busy
                      WHERE busy.subscription_id = s.id AND busy.status = 'processing'
                        AND busy.locked_until >= now()), 0)"#
        )
    };
}

/// The claim: per live endpoint, its oldest ready deliveries up to its [`room!`], so a slow
/// endpoint fills only its own slots and the others keep being served, and owners take turns.
/// `SKIP LOCKED` gives concurrent deliverers disjoint rows.
const CLAIM: &str = concat!(
    r#"
WITH claimed AS (
    UPDATE delivery
    SET "#,
    take_lease!(),
    r#"
    WHERE id IN (
        SELECT d.id
        FROM subscription s
        CROSS JOIN LATERAL (
            SELECT id, available_at FROM delivery
            WHERE subscription_id = s.id AND status = 'pending' AND available_at <= now()
            ORDER BY available_at
            LIMIT "#,
    room!("$4"),
    r#"
            FOR UPDATE SKIP LOCKED
        ) d
        WHERE s.disabled_at IS NULL
        -- Owners in turn, each one's oldest first: one owner's backlog across its endpoints
        -- never fills the claim ahead of another owner's one delivery (the buses, no owner,
        -- take a turn as one).
        ORDER BY row_number() OVER (PARTITION BY s.owner ORDER BY d.available_at), d.available_at
        LIMIT $3
    )
    RETURNING id, subscription_id, ticket_id, event_id, idempotency_key, attempts, claim_token,
              created_at, provisional, promoted
)
SELECT c.id, c.subscription_id, c.event_id, c.attempts, c.claim_token, c.created_at,
       s.kind, s.target, s.secret,
       CASE WHEN s.previous_secret_until > now() THEN s.previous_secret END,
       extract(epoch FROM now() - coalesce(s.failing_since, now()))::float8,
       c.ticket_id, r.is_urgent, r.department, r.urgency_score,
       r.model_version, r.prompt_version, r.policy_version,
       -- As the read side shows it (reads/read.rs): a duplicate's result was computed for
       -- someone else's ticket, before this one existed, and its event must not say so; a
       -- held ticket (docs/dedup.md) was evaluated, as far as anyone can tell, when its hold ended.
       greatest(r.computed_at, t.created_at, t.held_until),
       CASE WHEN s.include_text THEN t.subject END,
       CASE WHEN s.include_text THEN t.message END,
       c.provisional, r.answered_by, c.promoted
FROM claimed c
JOIN subscription s ON s.id = c.subscription_id
-- The answer announced: the final one, or the provisional one given before it.
CROSS JOIN LATERAL (
    SELECT is_urgent, department, urgency_score, model_version, prompt_version, policy_version,
           computed_at, answered_by
    FROM evaluation_result WHERE idempotency_key = c.idempotency_key AND NOT c.provisional
    UNION ALL
    SELECT is_urgent, department, urgency_score, model_version, prompt_version, policy_version,
           computed_at, 'local'
    FROM provisional_result WHERE idempotency_key = c.idempotency_key AND c.provisional
) r
JOIN ticket t ON t.id = c.ticket_id
"#
);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    Webhook,
    EventBridge,
    /// The desk's Zendesk account (`zendesk`): the answer written back to its ticket.
    Zendesk,
}

/// The event's `data` (SPEC): the same for webhooks and EventBridge's `Detail`.
#[derive(Debug, Clone, Serialize)]
pub struct EventData {
    pub ticket_id: Uuid,
    pub is_urgent: f64,
    pub department: String,
    pub urgency_score: f64,
    pub model_version: String,
    pub prompt_version: String,
    pub policy_version: String,
    pub evaluated_at: DateTime<Utc>,
    /// A provisional answer (the local classifier's, while the model could not be asked);
    /// the final one follows as another event.
    pub provisional: bool,
    /// Which stage of a cascade answered: `local` or `model`.
    pub answered_by: String,
    /// Only for a subscription that asked for the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A webhook's body: `{"type", "timestamp", "data"}` (Standard Webhooks' envelope).
#[derive(Debug, Clone, Serialize)]
pub struct Event<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub timestamp: DateTime<Utc>,
    pub data: &'a EventData,
}

pub const EVENT_TYPE: &str = "ticket.evaluated";

#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    lease: Lease,
    pub subscription_id: Uuid,
    pub event_id: String,
    pub attempts: i32,
    /// When the result was announced: the event's timestamp, and where its lag starts.
    pub announced_at: DateTime<Utc>,
    pub lease_ends: Instant,
    pub kind: SinkKind,
    /// URL or bus.
    pub target: String,
    /// Current secret first, then the previous one during a rotation window.
    pub secrets: Vec<String>,
    /// How long the endpoint has been failing (zero when its last attempt succeeded).
    pub failing_for: Duration,
    pub data: EventData,
    /// Announced for a promotion, not as the ticket's answer came (`delivery.promoted`, V41).
    pub promoted: bool,
}

pub async fn claim(
    client: &impl GenericClient,
    deliverer: &str,
    batch: i64,
    lease: Duration,
    per_endpoint: i64,
) -> Result<Vec<ClaimedDelivery>> {
    let statement = client.prepare_cached(CLAIM).await?;
    let lease_ends = Instant::now() + lease;
    let rows = client
        .query(
            &statement,
            &[&deliverer, &lease.as_secs_f64(), &batch, &per_endpoint],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let kind = match row.get::<_, &str>(6) {
                "eventbridge" => SinkKind::EventBridge,
                "zendesk" => SinkKind::Zendesk,
                _ => SinkKind::Webhook,
            };
            let secrets = [row.get::<_, Option<String>>(8), row.get(9)]
                .into_iter()
                .flatten()
                .collect();
            ClaimedDelivery {
                lease: Lease {
                    queue: Queue::Delivery,
                    id: row.get(0),
                    claim_token: row.get(4),
                },
                subscription_id: row.get(1),
                event_id: row.get(2),
                attempts: row.get(3),
                announced_at: row.get(5),
                lease_ends,
                kind,
                target: row.get(7),
                secrets,
                failing_for: Duration::from_secs_f64(row.get::<_, f64>(10).max(0.0)),
                data: EventData {
                    ticket_id: row.get(11),
                    is_urgent: row.get(12),
                    department: row.get(13),
                    urgency_score: row.get(14),
                    model_version: row.get(15),
                    prompt_version: row.get(16),
                    policy_version: row.get(17),
                    evaluated_at: row.get(18),
                    subject: row.get(19),
                    message: row.get(20),
                    provisional: row.get(21),
                    answered_by: row.get(22),
                },
                promoted: row.get(23),
            }
        })
        .collect())
}

/// What the scaler reads before starting deliverers (`pipeline::limits::fleet::deliverers_to_start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Backlog {
    /// Deliveries ready now that some endpoint has room for: what more deliverers could send.
    pub claimable: i64,
    /// Deliverers holding a live lease: invocations still running.
    pub running: i64,
}

/// Each live endpoint's ready deliveries up to its room: an index scan of bounded length each.
const BACKLOG: &str = concat!(
    r#"
SELECT (SELECT coalesce(sum(ready.n), 0)::bigint
        FROM subscription s
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM (
                SELECT 1 FROM delivery
                WHERE subscription_id = s.id AND status = 'pending' AND available_at <= now()
                LIMIT "#,
    room!("$1"),
    r#") up_to_room
        ) ready
        WHERE s.disabled_at IS NULL),
       (SELECT count(DISTINCT locked_by) FROM delivery
        WHERE status = 'processing' AND locked_until >= now())
"#
);

pub async fn backlog(client: &impl GenericClient, per_endpoint: i64) -> Result<Backlog> {
    let row = client.query_one(BACKLOG, &[&per_endpoint.max(1)]).await?;
    Ok(Backlog {
        claimable: row.get(0),
        running: row.get(1),
    })
}

/// Closes the delivery if still ours, and marks its endpoint healthy again.
const MARK_DELIVERED: &str = r#"
WITH done AS (
    UPDATE delivery
    SET status = 'done', finished_at = now(),
        locked_by = NULL, locked_until = NULL, last_error = NULL, error_class = NULL
    WHERE id = $1 AND claim_token = $2 AND status = 'processing'
    RETURNING subscription_id
), healthy AS (
    UPDATE subscription SET failing_since = NULL
    WHERE id IN (SELECT subscription_id FROM done) AND failing_since IS NOT NULL
)
SELECT count(*) FROM done
"#;

/// The endpoint has failed since at least now (kept when it already was failing).
const MARK_FAILING: &str =
    "UPDATE subscription SET failing_since = now() WHERE id = $1 AND failing_since IS NULL";

/// Disables the endpoint and gives up its other waiting deliveries: they stay in the table,
/// reported by `triage deliveries`, and come back with a replay. `$2`: the reason its owner
/// reads; `$3`: the operator's, in full.
const DISABLE_ENDPOINT: &str = r#"
WITH disabled AS (
    UPDATE subscription SET disabled_at = now(), disabled_reason = $2
    WHERE id = $1 AND disabled_at IS NULL
    RETURNING id
)
UPDATE delivery
SET status = 'dead', finished_at = now(), error_class = 'endpoint_disabled',
    last_error = $3
WHERE subscription_id IN (SELECT id FROM disabled) AND status = 'pending'
"#;

impl ClaimedDelivery {
    pub fn id(&self) -> i64 {
        self.lease.id
    }

    pub async fn delivered(&self, client: &impl GenericClient) -> Result<Fencing> {
        let statement = client.prepare_cached(MARK_DELIVERED).await?;
        let row = client
            .query_one(&statement, &[&self.lease.id, &self.lease.claim_token])
            .await?;
        Ok(Fencing::from_rows(row.get::<_, i64>(0) as u64))
    }

    pub async fn retry(
        &self,
        client: &impl GenericClient,
        after: Duration,
        error: &str,
    ) -> Result<Fencing> {
        let fencing = self
            .lease
            .reschedule(client, after, error, "delivery_failed")
            .await?;
        if fencing == Fencing::Held {
            client
                .execute(MARK_FAILING, &[&self.subscription_id])
                .await?;
        }
        Ok(fencing)
    }

    /// Ends this delivery, which its receiver refuses for good; the endpoint is not at fault.
    pub async fn abandon(&self, client: &impl GenericClient, reason: &str) -> Result<Fencing> {
        self.lease.dead_letter(client, reason, "abandoned").await
    }

    /// Gives this delivery up and disables its endpoint: `reason` for the operator, `shown`
    /// for the subscription's owner ([`super::decision::Decision::Disable`]).
    pub async fn disable_endpoint(
        &self,
        client: &impl GenericClient,
        reason: &str,
        shown: &str,
    ) -> Result<Fencing> {
        let fencing = self
            .lease
            .dead_letter(client, reason, "endpoint_disabled")
            .await?;
        if fencing == Fencing::Held {
            client
                .execute(
                    DISABLE_ENDPOINT,
                    &[&self.subscription_id, &shown, &bounded(reason)],
                )
                .await?;
        }
        Ok(fencing)
    }
}
