//! Subscriptions: a caller's webhook endpoints (`POST/GET/DELETE /subscriptions`), each owned
//! by the digest of the principal that made it, exactly as tickets are, so an endpoint only
//! hears of its owner's tickets. The secret is shown once, at creation or rotation.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use uuid::Uuid;

use super::{address, webhook};
use crate::{
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

pub async fn create(
    pool: &Pool,
    owner: Option<&str>,
    url: &str,
    include_text: bool,
    allowed_hosts: &[String],
) -> Result<Created> {
    let url = address::check_url(url, allowed_hosts)
        .map_err(|refused| InvalidRequest::new("url", refused.to_string()))?;
    let secret = webhook::new_secret();
    let client = db::client(pool).await?;
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
    Ok(Created {
        subscription: from_row(&row),
        secret,
    })
}

pub async fn list(pool: &Pool, owner: Option<&str>) -> Result<Vec<Subscription>> {
    let client = db::client(pool).await?;
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM subscription
                 WHERE kind = 'webhook' AND owner IS NOT DISTINCT FROM $1 ORDER BY created_at"
            ),
            &[&owner],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
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
