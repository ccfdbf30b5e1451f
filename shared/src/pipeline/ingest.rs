//! Ticket creation (article step 1): the ticket and the intention to evaluate it are born in
//! one transaction, or not at all. A second ticket with the same content gets its own ticket
//! row and link, but `ON CONFLICT DO NOTHING` keeps the job (and the bill) single. Each ticket
//! records its owner, and counts against the owner's daily quota when one is set.

use std::time::Duration;

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

/// Who creates a ticket: its owner (`http::Caller::owner`), the owner's daily quota
/// (`TRIAGE_CALLER_DAILY_TICKETS`; `None`, no quota), and how long a ticket whose content
/// another owner sent first is held (`TRIAGE_DEDUP_HOLD_SECONDS`; zero, not held).
#[derive(Debug, Clone, Copy)]
pub struct Submitter<'a> {
    pub owner: &'a str,
    pub daily_quota: Option<u32>,
    pub dedup_hold: Duration,
}

impl Submitter<'static> {
    /// The local server's one caller (on loopback, or holding `TRIAGE_API_TOKEN`), and tools
    /// and tests that ingest directly: the owner `local` (never 32 hex digits, so never a
    /// principal's digest), no quota.
    pub const LOCAL: Self = Submitter {
        owner: "local",
        daily_quota: None,
        dedup_hold: Duration::ZERO,
    };
}

/// What a ticket creation resolves to.
#[derive(Debug)]
pub enum Outcome {
    Created(Created),
    /// Same `Idempotency-Key`, same request: the first response, replayed.
    Replay {
        status: u16,
        body: serde_json::Value,
    },
    /// Same `Idempotency-Key`, different request.
    Mismatch,
    /// The owner created its quota of tickets today (UTC); nothing was written.
    OverQuota {
        retry_after: Duration,
    },
}

/// Ticket, link and job in one statement: one round trip, one implicit transaction. A
/// duplicate whose content already has a result is announced to its owner's subscribers here
/// (`announced`: nothing to join without subscribers), as the job's completion does for the
/// tickets it finds waiting.
///
/// A ticket whose content another owner sent first is held (`held_until`, a random 0.5 to 1.5
/// times `$8` seconds from now): shown pending and announced no earlier, as a fresh evaluation
/// would be, so that dedup tells its sender nothing (docs/dedup.md); not when the owner sent
/// the content before itself (it knows). The lookups are index probes on the key's links;
/// this statement's own ticket is not in their snapshot.
const INSERT_TICKET_AND_JOB: &str = concat!(
    r#"
WITH new_ticket AS (
    INSERT INTO ticket (id, subject, message, owner, held_until)
    SELECT $1, $2, $3, $7,
           CASE WHEN $8::float8 > 0 AND EXISTS (
                    SELECT 1 FROM ticket_evaluation te JOIN ticket other ON other.id = te.ticket_id
                    WHERE te.idempotency_key = $4 AND other.workload = 'production'
                      AND other.owner IS DISTINCT FROM $7)
                AND NOT EXISTS (
                    SELECT 1 FROM ticket_evaluation te JOIN ticket own ON own.id = te.ticket_id
                    WHERE te.idempotency_key = $4 AND own.owner IS NOT DISTINCT FROM $7)
                THEN now() + make_interval(secs => $8::float8 * (0.5 + random())) END
    RETURNING created_at, held_until
), link AS (
    INSERT INTO ticket_evaluation (ticket_id, idempotency_key, prompt_version, model_version)
    VALUES ($1, $4, $5, $6)
), job AS (
    INSERT INTO evaluation_outbox (ticket_id, idempotency_key, prompt_version, model_version)
    VALUES ($1, $4, $5, $6)
    ON CONFLICT (idempotency_key) DO NOTHING
), announced AS (
    INSERT INTO delivery (subscription_id, ticket_id, idempotency_key, event_id, available_at)
    SELECT s.id, $1, r.idempotency_key, "#,
    crate::pipeline::outbox::announce::event_id!("$1", "r.idempotency_key"),
    r#",
           greatest(now(), (SELECT held_until FROM new_ticket))
    FROM evaluation_result r
    JOIN subscription s ON s.disabled_at IS NULL
         AND (s.kind = 'eventbridge' OR s.owner IS NOT DISTINCT FROM $7)
    WHERE r.idempotency_key = $4
)
SELECT created_at FROM new_ticket
"#
);

/// Counts one ticket against the owner's quota for today (UTC); no row when it is used up.
/// The row lock serialises one owner's concurrent ingests for the rest of the transaction.
const COUNT_AGAINST_QUOTA: &str = r#"
INSERT INTO caller_daily_tickets (owner, day, tickets)
VALUES ($1, (now() AT TIME ZONE 'UTC')::date, 1)
ON CONFLICT (owner, day) DO UPDATE SET tickets = caller_daily_tickets.tickets + 1
    WHERE caller_daily_tickets.tickets < $2
RETURNING tickets
"#;

pub async fn create_ticket(
    pool: &Pool,
    versions: &Versions,
    ticket: &NewTicket,
    submitter: Submitter<'_>,
) -> Result<Outcome> {
    let mut client = db::client(pool).await?;
    let id = TicketId::new();
    if submitter.daily_quota.is_none() {
        // The hot path: one statement, one implicit transaction.
        let created = insert(&client, versions, ticket, submitter, id).await?;
        return Ok(Outcome::Created(created));
    }
    let tx = client.transaction().await?;
    if let Some(over) = over_quota(&tx, submitter).await? {
        return Ok(over);
    }
    let created = insert(&tx, versions, ticket, submitter, id).await?;
    tx.commit().await?;
    Ok(Outcome::Created(created))
}

/// `Some(OverQuota)` when the owner's quota is used up (the caller then drops its
/// transaction, so nothing of the request is kept); else today's count has gone up by one.
async fn over_quota(
    client: &impl GenericClient,
    submitter: Submitter<'_>,
) -> Result<Option<Outcome>> {
    let Some(quota) = submitter.daily_quota else {
        return Ok(None);
    };
    let quota = i32::try_from(quota).unwrap_or(i32::MAX);
    let counted = client
        .query_opt(COUNT_AGAINST_QUOTA, &[&submitter.owner, &quota])
        .await?;
    Ok(counted.is_none().then(|| Outcome::OverQuota {
        retry_after: until_next_utc_day(Utc::now()),
    }))
}

/// How long until the quota's day ends (00:00 UTC), rounded up to a whole second.
pub fn until_next_utc_day(now: DateTime<Utc>) -> Duration {
    let tomorrow = (now.date_naive() + chrono::Days::new(1))
        .and_hms_opt(0, 0, 0)
        .expect("midnight exists")
        .and_utc();
    let left = (tomorrow - now).to_std().unwrap_or_default();
    Duration::from_secs(left.as_secs() + u64::from(left.subsec_nanos() > 0))
}

/// Creates the ticket once per `Idempotency-Key` (`request_key`, already scoped to its caller by
/// `http::Caller`): the key row is claimed in the same transaction as the ticket, so a
/// concurrent request with the same key waits on the unique index and then replays the winner's
/// response. Expired keys are taken over. A replay does not count against the quota.
pub async fn create_ticket_keyed(
    pool: &Pool,
    versions: &Versions,
    ticket: &NewTicket,
    submitter: Submitter<'_>,
    request_key: &str,
    ttl: Duration,
) -> Result<Outcome> {
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
            Outcome::Replay {
                status: row.get::<_, i32>(1) as u16,
                body: row.get(2),
            }
        } else {
            Outcome::Mismatch
        });
    }
    if let Some(over) = over_quota(&tx, submitter).await? {
        return Ok(over);
    }
    let created = insert(&tx, versions, ticket, submitter, id).await?;
    tx.execute(
        "UPDATE request_idempotency SET response_body = $2 WHERE key = $1",
        &[&request_key, &created.body()],
    )
    .await?;
    tx.commit().await?;
    Ok(Outcome::Created(created))
}

async fn insert(
    client: &impl GenericClient,
    versions: &Versions,
    ticket: &NewTicket,
    submitter: Submitter<'_>,
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
                &submitter.owner,
                &submitter.dedup_hold.as_secs_f64(),
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

/// Removes request keys past their expiry, and the quota counts of days before yesterday (UTC)
/// (run by the sweeper). Returns the number of request keys removed.
pub async fn expire_request_keys(pool: &Pool, batch: i64) -> Result<u64> {
    let client = db::client(pool).await?;
    client
        .execute(
            "DELETE FROM caller_daily_tickets WHERE (owner, day) IN
               (SELECT owner, day FROM caller_daily_tickets
                WHERE day < (now() AT TIME ZONE 'UTC')::date - 1 LIMIT $1)",
            &[&batch],
        )
        .await?;
    Ok(client
        .execute(
            "DELETE FROM request_idempotency WHERE key IN
               (SELECT key FROM request_idempotency WHERE expires_at <= now() LIMIT $1)",
            &[&batch],
        )
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_refusal_is_retried_when_the_utc_day_ends() {
        let at = |text: &str| text.parse::<DateTime<Utc>>().unwrap();
        for (now, seconds) in [
            ("2026-12-01T00:00:00Z", 86_400),
            ("2026-12-01T23:59:59Z", 1),
            ("2026-12-01T23:59:59.200Z", 1),
            ("2026-12-31T12:00:00Z", 43_200),
        ] {
            assert_eq!(until_next_utc_day(at(now)).as_secs(), seconds, "{now}");
        }
    }
}
