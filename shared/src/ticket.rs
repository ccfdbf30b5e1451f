//! The read side: a ticket and the evaluation of its content.

use std::{fmt, str::FromStr};

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use uuid::Uuid;

use crate::{config::Versions, db, error::Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct TicketId(pub Uuid);

impl TicketId {
    pub fn new() -> Self {
        Self(Uuid::new_v4())
    }
}

impl Default for TicketId {
    fn default() -> Self {
        Self::new()
    }
}

impl FromStr for TicketId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

impl fmt::Display for TicketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TicketView {
    pub id: TicketId,
    pub subject: String,
    pub message: String,
    pub created_at: DateTime<Utc>,
    pub evaluation: EvaluationView,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvaluationView {
    /// `pending`, `processing`, `done` or `dead`.
    pub status: String,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub result: Option<ResultView>,
    /// Versions whose evaluation this is (also while it is still pending).
    pub requested_prompt_version: String,
    pub requested_model_version: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResultView {
    pub is_urgent: f64,
    pub department: String,
    pub urgency_score: f64,
    pub model_version: String,
    pub prompt_version: String,
    pub policy_version: String,
    pub evaluated_at: DateTime<Utc>,
}

/// A ticket resolves to the evaluation of its *content* (via its key), so duplicates show the
/// one shared result. Of the versions a ticket has, the configured one is preferred, then the
/// newest. A finished job whose outbox row was removed by retention is still `done`: the
/// result is what counts.
const SELECT_TICKET: &str = r#"
SELECT t.id, t.subject, t.message, t.created_at,
       te.prompt_version, te.model_version,
       o.status,
       r.is_urgent, r.department, r.urgency_score,
       r.model_version, r.prompt_version, r.policy_version, r.computed_at
FROM ticket t
LEFT JOIN LATERAL (
    SELECT idempotency_key, prompt_version, model_version
    FROM ticket_evaluation
    WHERE ticket_id = t.id
    ORDER BY (prompt_version = $2 AND model_version = $3) DESC, created_at DESC
    LIMIT 1
) te ON true
LEFT JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
LEFT JOIN evaluation_outbox o ON o.idempotency_key = te.idempotency_key
WHERE t.id = $1
"#;

pub async fn find(pool: &Pool, versions: &Versions, id: TicketId) -> Result<Option<TicketView>> {
    let client = db::client(pool).await?;
    let Some(row) = client
        .query_opt(SELECT_TICKET, &[&id.0, &versions.prompt, &versions.model])
        .await?
    else {
        return Ok(None);
    };
    let result = row
        .get::<_, Option<String>>(8)
        .map(|department| ResultView {
            is_urgent: row.get(7),
            department,
            urgency_score: row.get(9),
            model_version: row.get(10),
            prompt_version: row.get(11),
            policy_version: row.get(12),
            evaluated_at: row.get(13),
        });
    let status = match (&result, row.get::<_, Option<String>>(6)) {
        (Some(_), _) => "done".to_string(),
        (None, Some(status)) => status,
        (None, None) => "pending".to_string(),
    };
    Ok(Some(TicketView {
        id: TicketId(row.get(0)),
        subject: row.get(1),
        message: row.get(2),
        created_at: row.get(3),
        evaluation: EvaluationView {
            status,
            result,
            requested_prompt_version: row.get::<_, Option<String>>(4).unwrap_or_default(),
            requested_model_version: row.get::<_, Option<String>>(5).unwrap_or_default(),
        },
    }))
}
