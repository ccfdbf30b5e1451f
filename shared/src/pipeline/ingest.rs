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
    pipeline::limits::caller_rate,
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
/// (`TRIAGE_CALLER_DAILY_TICKETS`; `None`, no quota), its request rate
/// (`TRIAGE_CALLER_RPM`, `limits::caller_rate`; `None`, not counted here: the request was
/// counted before, or is not rated), and how long a ticket whose content another owner sent
/// first is held (`TRIAGE_DEDUP_HOLD_SECONDS`; zero, not held).
#[derive(Debug, Clone, Copy)]
pub struct Submitter<'a> {
    pub owner: &'a str,
    pub daily_quota: Option<u32>,
    pub rate_per_minute: Option<u32>,
    pub dedup_hold: Duration,
}

impl Submitter<'static> {
    /// The local server's one caller (on loopback, or holding `TRIAGE_API_TOKEN`), and tools
    /// and tests that ingest directly: the owner `local` (never 32 hex digits, so never a
    /// principal's digest), no quota.
    pub const LOCAL: Self = Submitter {
        owner: "local",
        daily_quota: None,
        rate_per_minute: None,
        dedup_hold: Duration::ZERO,
    };
}

/// The owner stored for `principal`: a digest of it (32 hex digits: rows stay short however
/// long an ARN is, and the principal itself is not copied into every ticket).
pub fn owner_of(principal: &str) -> String {
    hex::encode(&Sha256::digest(principal.as_bytes())[..16])
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
    /// The owner made its `rate_per_minute` requests of this minute; nothing was written.
    RateLimited {
        retry_after: Duration,
    },
}

/// Ticket, link and job in one statement: one round trip, one implicit transaction. The work
/// is `ticket_ingest`'s (migration V33): the job under the deployment's policy (`$11`), the
/// request's rate (`$9`) and the ticket's daily quota (`$10`) counted first when set, `ON CONFLICT DO NOTHING` on the job, the dedup hold
/// (docs/dedup.md: a ticket whose content another owner sent first reads as pending for a
/// random 0.5 to 1.5 times `$8` seconds), and the announcement of a duplicate whose content
/// already has a result. A function of small statements because the pool's sessions plan
/// every execution (docs/database.md): as one statement of four CTEs and two joined probes,
/// its planning was half of each ticket's database work (docs/benchmarks.md).
const INSERT_TICKET_AND_JOB: &str =
    "SELECT created, refused FROM ticket_ingest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

/// Ticket, link and job on `client`, inside a transaction of the caller's that writes more
/// beside them (the Zendesk connector's row of the desk's ticket); no rate or quota is counted.
pub async fn create_ticket_on(
    client: &impl GenericClient,
    versions: &Versions,
    ticket: &NewTicket,
    submitter: Submitter<'_>,
) -> Result<Created> {
    let uncounted = Submitter {
        daily_quota: None,
        rate_per_minute: None,
        ..submitter
    };
    match insert(client, versions, ticket, uncounted, TicketId::new()).await? {
        Outcome::Created(created) => Ok(created),
        _ => unreachable!("ticket_ingest refuses only by a rate or a quota, and none is counted"),
    }
}

/// Counts one ticket against the owner's quota for today (UTC); NULL when it is used up (V33's
/// `caller_day_count`, which ingest's statement calls itself where no request key is given).
const COUNT_AGAINST_QUOTA: &str = "SELECT caller_day_count($1, $2)";

/// One statement whatever the limits: the rate and the quota are counted by it.
pub async fn create_ticket(
    pool: &Pool,
    versions: &Versions,
    ticket: &NewTicket,
    submitter: Submitter<'_>,
) -> Result<Outcome> {
    let client = db::client(pool).await?;
    insert(&client, versions, ticket, submitter, TicketId::new()).await
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
    let counted: Option<i32> = client
        .query_one(COUNT_AGAINST_QUOTA, &[&submitter.owner, &limit(quota)])
        .await?
        .get(0);
    Ok(counted.is_none().then(|| Outcome::OverQuota {
        retry_after: until_next_utc_day(Utc::now()),
    }))
}

/// A limit as the database counts it (a larger one is no limit in practice).
fn limit(limit: u32) -> i32 {
    i32::try_from(limit).unwrap_or(i32::MAX)
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
/// response. Expired keys are taken over. A replay does not count against the quota. The
/// request's rate is counted by the caller, before (a replay counts against it).
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
    // Counted above (the quota) and by the caller (the rate): the insert counts nothing.
    let uncounted = Submitter {
        daily_quota: None,
        rate_per_minute: None,
        ..submitter
    };
    let created = match insert(&tx, versions, ticket, uncounted, id).await? {
        Outcome::Created(created) => created,
        refused => return Ok(refused),
    };
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
) -> Result<Outcome> {
    let key = IdempotencyKey::derive_under(
        &ticket.subject,
        &ticket.message,
        versions.prompt.as_str(),
        versions.model.as_str(),
        versions.policy.as_str(),
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
                &submitter.rate_per_minute.map(limit),
                &submitter.daily_quota.map(limit),
                &versions.policy.as_str(),
            ],
        )
        .await?;
    let now = Utc::now();
    Ok(match (row.get(0), row.get::<_, Option<&str>>(1)) {
        (Some(created_at), _) => Outcome::Created(Created { id, created_at }),
        (None, Some("rate")) => Outcome::RateLimited {
            retry_after: caller_rate::until_next_minute(now),
        },
        (None, _) => Outcome::OverQuota {
            retry_after: until_next_utc_day(now),
        },
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
