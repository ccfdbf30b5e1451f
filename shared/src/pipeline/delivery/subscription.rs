//! Subscriptions: a caller's webhook endpoints (`POST/GET/DELETE /subscriptions`), each owned
//! by the digest of the principal that made it, exactly as tickets are, so an endpoint only
//! hears of its owner's tickets. The secret is shown once, at creation or rotation.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use uuid::Uuid;

use super::{address, webhook};
use crate::{
    config::DeliveryPolicy,
    db,
    domain::error::{InvalidRequest, Result},
};

/// How long the previous secret is still signed with after a rotation.
const ROTATION_WINDOW_SECS: f64 = 24.0 * 3600.0;

#[derive(Debug, Clone, Serialize)]
pub struct Subscription {
    pub id: Uuid,
    pub url: String,
    pub include_text: bool,
    pub created_at: DateTime<Utc>,
    /// `active` or `disabled`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<DateTime<Utc>>,
}

/// A subscription as created: the only time its secret is shown.
#[derive(Debug, Clone, Serialize)]
pub struct Created {
    #[serde(flatten)]
    pub subscription: Subscription,
    pub secret: String,
}

const COLUMNS: &str =
    "id, target, include_text, created_at, disabled_at IS NOT NULL, disabled_reason, failing_since";

fn from_row(row: &tokio_postgres::Row) -> Subscription {
    Subscription {
        id: row.get(0),
        url: row.get(1),
        include_text: row.get(2),
        created_at: row.get(3),
        status: if row.get(4) { "disabled" } else { "active" },
        disabled_reason: row.get(5),
        failing_since: row.get(6),
    }
}

/// What a creation came to.
#[derive(Debug)]
pub enum Creation {
    Created(Created),
    /// The owner has `limit` subscriptions already (`TRIAGE_SUBSCRIPTIONS_PER_CALLER`):
    /// nothing was written.
    AtLimit {
        limit: i64,
    },
}

impl Creation {
    /// The subscription made, or `None` at the limit.
    pub fn created(self) -> Option<Created> {
        match self {
            Creation::Created(created) => Some(created),
            Creation::AtLimit { .. } => None,
        }
    }
}

/// Every result fans out to each of its owner's subscriptions: the cap bounds what one caller
/// can multiply deliveries by (and aim the service at other hosts with).
const COUNT_OWNERS: &str =
    "SELECT count(*) FROM subscription WHERE kind = 'webhook' AND owner IS NOT DISTINCT FROM $1";
/// One owner's creations one at a time (for the transaction), so two at once cannot both
/// pass the count.
const LOCK_OWNER: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended('subscription/' || coalesce($1, ''), 0))";

pub async fn create(
    pool: &Pool,
    owner: Option<&str>,
    url: &str,
    include_text: bool,
    policy: &DeliveryPolicy,
) -> Result<Creation> {
    let url = address::check_url(url, &policy.allowed_hosts)
        .map_err(|refused| InvalidRequest::new("url", refused.to_string()))?;
    let secret = webhook::new_secret();
    let mut client = db::client(pool).await?;
    let client = client.transaction().await?;
    client.execute(LOCK_OWNER, &[&owner]).await?;
    let have: i64 = client.query_one(COUNT_OWNERS, &[&owner]).await?.get(0);
    if have >= policy.subscriptions_per_caller {
        return Ok(Creation::AtLimit {
            limit: policy.subscriptions_per_caller,
        });
    }
    let row = client
        .query_one(
            &format!(
                "INSERT INTO subscription (id, kind, owner, target, secret, include_text)
                 VALUES ($1, 'webhook', $2, $3, $4, $5) RETURNING {COLUMNS}"
            ),
            &[
                &Uuid::new_v4(),
                &owner,
                &url.as_str(),
                &secret,
                &include_text,
            ],
        )
        .await?;
    client.commit().await?;
    Ok(Creation::Created(Created {
        subscription: from_row(&row),
        secret,
    }))
}

/// One page of a listing: at most the page's size, oldest first, and where the next starts.
#[derive(Debug, Clone, Serialize)]
pub struct Page {
    pub subscriptions: Vec<Subscription>,
    /// The id to pass as `after` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// The owner's subscriptions after the one with id `after` (none: from the first), at most
/// `limit`, oldest first (ties by id).
pub async fn list(
    pool: &Pool,
    owner: Option<&str>,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Page> {
    let client = db::client(pool).await?;
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM subscription
                 WHERE kind = 'webhook' AND owner IS NOT DISTINCT FROM $1
                   AND ($2::uuid IS NULL OR (created_at, id) > (
                        SELECT created_at, id FROM subscription WHERE id = $2))
                 ORDER BY created_at, id
                 LIMIT $3::bigint + 1"
            ),
            &[&owner, &after, &limit],
        )
        .await?;
    let mut subscriptions: Vec<Subscription> = rows.iter().map(from_row).collect();
    let next = (subscriptions.len() as i64 > limit).then(|| {
        subscriptions.truncate(limit as usize);
        subscriptions.last().map(|s| s.id)
    });
    Ok(Page {
        subscriptions,
        next: next.flatten(),
    })
}

/// Deletes the owner's subscription and its deliveries; `false` when it has none by that id.
pub async fn delete(pool: &Pool, owner: Option<&str>, id: Uuid) -> Result<bool> {
    let client = db::client(pool).await?;
    let n = client
        .execute(
            "DELETE FROM subscription WHERE id = $1 AND kind = 'webhook' AND owner IS NOT DISTINCT FROM $2",
            &[&id, &owner],
        )
        .await?;
    Ok(n == 1)
}

/// A new secret; the previous one is still signed with for a day, so receivers can switch
/// without losing a delivery. `None` when the owner has no subscription by that id.
pub async fn rotate(pool: &Pool, owner: Option<&str>, id: Uuid) -> Result<Option<Created>> {
    let secret = webhook::new_secret();
    let client = db::client(pool).await?;
    let row = client
        .query_opt(
            &format!(
                "UPDATE subscription
                 SET previous_secret = secret, secret = $3,
                     previous_secret_until = now() + make_interval(secs => $4)
                 WHERE id = $1 AND kind = 'webhook' AND owner IS NOT DISTINCT FROM $2
                 RETURNING {COLUMNS}"
            ),
            &[&id, &owner, &secret, &ROTATION_WINDOW_SECS],
        )
        .await?;
    Ok(row.map(|row| Created {
        subscription: from_row(&row),
        secret,
    }))
}
