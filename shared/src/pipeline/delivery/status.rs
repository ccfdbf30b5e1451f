//! The read side of delivery for operators: `triage deliveries` (pending, failing, disabled,
//! by endpoint), the lag metric (age of the oldest undelivered event, alarmed), and replay of
//! an endpoint's events since a time (same event ids, so receivers dedupe).

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use uuid::Uuid;

use crate::{db, domain::error::Result, pipeline::outbox::announce::requeued, telemetry::metric};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndpointReport {
    pub subscription_id: Uuid,
    pub kind: String,
    /// The URL or the bus.
    pub target: String,
    /// `active`, `failing` (its last attempt failed) or `disabled`.
    pub status: &'static str,
    pub pending: i64,
    pub processing: i64,
    pub delivered: i64,
    /// Given up when the endpoint was disabled, or `abandoned`: refused for good by the
    /// receiver (a closed Zendesk ticket). A replay brings them back.
    pub dead: i64,
    pub oldest_pending_age_seconds: Option<f64>,
    pub failing_since: Option<DateTime<Utc>>,
    pub disabled_reason: Option<String>,
    pub last_error: Option<String>,
}

impl EndpointReport {
    /// Why the endpoint fails or was disabled, as the operator reads it: the last error in
    /// full (a refused address included), else the reason its owner is shown.
    pub fn why(&self) -> Option<&str> {
        self.last_error
            .as_deref()
            .or(self.disabled_reason.as_deref())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeliveriesReport {
    pub oldest_undelivered_age_seconds: Option<f64>,
    pub endpoints: Vec<EndpointReport>,
}

const OLDEST_UNDELIVERED: &str = "SELECT extract(epoch FROM now() - min(created_at))::float8
     FROM delivery WHERE status IN ('pending', 'processing')";

pub async fn deliveries(pool: &Pool) -> Result<DeliveriesReport> {
    let client = db::client(pool).await?;
    let rows = client
        .query(
            r#"
            SELECT s.id, s.kind, s.target, s.disabled_at IS NOT NULL, s.failing_since,
                   s.disabled_reason,
                   count(*) FILTER (WHERE d.status = 'pending'),
                   count(*) FILTER (WHERE d.status = 'processing'),
                   count(*) FILTER (WHERE d.status = 'done'),
                   count(*) FILTER (WHERE d.status = 'dead'),
                   extract(epoch FROM now() - min(d.created_at)
                       FILTER (WHERE d.status IN ('pending', 'processing')))::float8,
                   (SELECT last_error FROM delivery l
                    WHERE l.subscription_id = s.id AND l.last_error IS NOT NULL
                    ORDER BY l.id DESC LIMIT 1)
            FROM subscription s
            LEFT JOIN delivery d ON d.subscription_id = s.id
            GROUP BY s.id
            ORDER BY s.disabled_at IS NOT NULL DESC, s.failing_since NULLS LAST, s.created_at
            "#,
            &[],
        )
        .await?;
    let endpoints = rows
        .iter()
        .map(|row| {
            let failing_since: Option<DateTime<Utc>> = row.get(4);
            EndpointReport {
                subscription_id: row.get(0),
                kind: row.get(1),
                target: row.get(2),
                status: match (row.get::<_, bool>(3), failing_since.is_some()) {
                    (true, _) => "disabled",
                    (false, true) => "failing",
                    (false, false) => "active",
                },
                failing_since,
                disabled_reason: row.get(5),
                pending: row.get(6),
                processing: row.get(7),
                delivered: row.get(8),
                dead: row.get(9),
                oldest_pending_age_seconds: row.get(10),
                last_error: row.get(11),
            }
        })
        .collect();
    let oldest = client.query_one(OLDEST_UNDELIVERED, &[]).await?.get(0);
    Ok(DeliveriesReport {
        oldest_undelivered_age_seconds: oldest,
        endpoints,
    })
}

/// Emits the lag metric (zero when nothing waits); a failure to read it is logged, never
/// fatal to the invocation that delivered.
pub async fn emit_lag(pool: &Pool) {
    let read = async {
        let client = db::client(pool).await?;
        let row = client.query_one(OLDEST_UNDELIVERED, &[]).await?;
        Ok::<Option<f64>, crate::domain::error::Error>(row.get(0))
    };
    match read.await {
        Ok(age) => metric::oldest_undelivered_age(age.unwrap_or(0.0)),
        Err(error) => tracing::warn!(error = %error.report(), "delivery lag not read"),
    }
}

const REPLAY: &str = concat!(
    r#"
WITH enabled AS (
    UPDATE subscription
    SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL
    WHERE id = $1
), queued AS (
    UPDATE delivery
    SET "#,
    requeued!("now()"),
    r#"
    WHERE subscription_id = $1 AND created_at >= $2 AND status IN ('done', 'dead')
    RETURNING 1
)
SELECT count(*) FROM queued
"#
);

/// Queues again every event announced to `subscription` since `since`, delivered or given up,
/// with its original event id; re-enables the endpoint. Answers how many were queued.
pub async fn replay(pool: &Pool, subscription: Uuid, since: DateTime<Utc>) -> Result<u64> {
    let client = db::client(pool).await?;
    let row = client.query_one(REPLAY, &[&subscription, &since]).await?;
    Ok(row.get::<_, i64>(0) as u64)
}
