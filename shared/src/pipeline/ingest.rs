//! Ticket creation (article step 1): the ticket and the intention to evaluate it are born in
//! one transaction, or not at all. A second ticket with the same content gets its own ticket
//! row and link, but `ON CONFLICT DO NOTHING` keeps the job (and the bill) single.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::{
    db,
    domain::{error::Result, key::IdempotencyKey, ticket::TicketId, versions::Versions},
};

/// A ticket that passed validation (see `http::tickets`).
#[derive(Debug, Clone)]
pub struct NewTicket {
    pub subject: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    pub id: TicketId,
    pub created_at: DateTime<Utc>,
}

impl Created {
    /// The body of `201 Created`, stored as is for `Idempotency-Key` replays.
    pub fn body(&self) -> serde_json::Value {
        json!({ "id": self.id, "created_at": self.created_at, "evaluation": { "status": "pending" } })
    }
}

/// What a request carrying an `Idempotency-Key` header resolves to.
#[derive(Debug)]
pub enum KeyedOutcome {
    Created(Created),
    /// Same key, same request: the first response, replayed.
    Replay {
        status: u16,
        body: serde_json::Value,
    },
    /// Same key, different request.
    Mismatch,
}

/// Ticket, link and job in one statement: one round trip, one implicit transaction.
const INSERT_TICKET_AND_JOB: &str = r#"
WITH new_ticket AS (
    INSERT INTO ticket (id, subject, message) VALUES ($1, $2, $3)
    RETURNING created_at
), link AS (
    INSERT INTO ticket_evaluation (ticket_id, idempotency_key, prompt_version, model_version)
    VALUES ($1, $4, $5, $6)
), job AS (
    INSERT INTO evaluation_outbox (ticket_id, idempotency_key, prompt_version, model_version)
    VALUES ($1, $4, $5, $6)
    ON CONFLICT (idempotency_key) DO NOTHING
)
SELECT created_at FROM new_ticket
"#;

pub async fn create_ticket(
    pool: &Pool,
    versions: &Versions,
    ticket: &NewTicket,
) -> Result<Created> {
    let client = db::client(pool).await?;
    insert(&client, versions, ticket, TicketId::new()).await
}

/// Creates the ticket once per `Idempotency-Key` (`request_key`, already scoped to its caller by
/// `http::Caller`): the key row is claimed in the same transaction as the ticket, so a
/// concurrent request with the same key waits on the unique index and then replays the winner's
/// response. Expired keys are taken over.
pub async fn create_ticket_keyed(
    pool: &Pool,
    versions: &Versions,
    ticket: &NewTicket,
    request_key: &str,
    ttl: std::time::Duration,
) -> Result<KeyedOutcome> {
    let mut client = db::client(pool).await?;
    let tx = client.transaction().await?;
    let id = TicketId::new();
    let fingerprint = fingerprint(ticket);
    let claimed = tx
        .query_opt(
            r#"
            INSERT INTO request_idempotency
                (key, request_fingerprint, ticket_id, response_status, response_body, expires_at)
            VALUES ($1, $2, $3, 201, '{}', now() + make_interval(secs => $4))
            ON CONFLICT (key) DO UPDATE
                SET request_fingerprint = EXCLUDED.request_fingerprint,
                    ticket_id = EXCLUDED.ticket_id,
                    created_at = now(),
                    expires_at = EXCLUDED.expires_at
                WHERE request_idempotency.expires_at <= now()
            RETURNING key
            "#,
            &[&request_key, &fingerprint, &id.0, &ttl.as_secs_f64()],
        )
        .await?;
    if claimed.is_none() {
        let row = tx
            .query_one(
                "SELECT request_fingerprint, response_status, response_body FROM request_idempotency WHERE key = $1",
                &[&request_key],
            )
            .await?;
        let stored: String = row.get(0);
        return Ok(if stored == fingerprint {
            KeyedOutcome::Replay {
                status: row.get::<_, i32>(1) as u16,
                body: row.get(2),
            }
        } else {
            KeyedOutcome::Mismatch
        });
    }
    let created = insert(&tx, versions, ticket, id).await?;
    tx.execute(
        "UPDATE request_idempotency SET response_body = $2 WHERE key = $1",
        &[&request_key, &created.body()],
    )
    .await?;
    tx.commit().await?;
    Ok(KeyedOutcome::Created(created))
}

async fn insert(
    client: &impl GenericClient,
    versions: &Versions,
    ticket: &NewTicket,
    id: TicketId,
) -> Result<Created> {
    let key = IdempotencyKey::derive(
        &ticket.subject,
        &ticket.message,
        versions.prompt.as_str(),
        versions.model.as_str(),
    );
    // Prepared once per connection (deadpool's statement cache): `query_one(&str)` would
    // prepare on every call, a second round trip and a parse and plan on the server each time.
    let statement = client.prepare_cached(INSERT_TICKET_AND_JOB).await?;
    let row = client
        .query_one(
            &statement,
            &[
                &id.0,
                &ticket.subject,
                &ticket.message,
                &key.as_str(),
                &versions.prompt,
                &versions.model,
            ],
        )
        .await?;
    Ok(Created {
        id,
        created_at: row.get(0),
    })
}

/// `triage eval`'s tickets: ids chosen by the caller (derived from the labelled row, so a
/// rerun finds them), marked as eval work so no production report counts them. A ticket
/// already there is left as it is.
pub async fn insert_eval_tickets(
    client: &impl GenericClient,
    ids: &[uuid::Uuid],
    subjects: &[&str],
    messages: &[&str],
) -> Result<u64> {
    Ok(client
        .execute(
            "INSERT INTO ticket (id, subject, message, workload)
             SELECT id, subject, message, 'eval'
             FROM unnest($1::uuid[], $2::text[], $3::text[]) AS t (id, subject, message)
             ON CONFLICT (id) DO NOTHING",
            &[&ids, &subjects, &messages],
        )
        .await?)
}

/// What "the same request" means for `Idempotency-Key`: the same subject and message.
fn fingerprint(ticket: &NewTicket) -> String {
    let mut hasher = Sha256::new();
    hasher.update(ticket.subject.as_bytes());
    hasher.update([0u8]); // NUL never occurs in a valid ticket, so the split is unambiguous.
    hasher.update(ticket.message.as_bytes());
    hex::encode(hasher.finalize())
}

/// Removes request keys past their expiry (run by the sweeper).
pub async fn expire_request_keys(pool: &Pool, batch: i64) -> Result<u64> {
    let client = db::client(pool).await?;
    Ok(client
        .execute(
            "DELETE FROM request_idempotency WHERE key IN
               (SELECT key FROM request_idempotency WHERE expires_at <= now() LIMIT $1)",
            &[&batch],
        )
        .await?)
}
