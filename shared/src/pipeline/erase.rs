//! Erasure: a ticket, its links and its `Idempotency-Key` records go in one transaction. A
//! result (and its job) still shared by another ticket of the same content stays for that
//! ticket, handed over to it; a result and job no ticket refers to any more go
//! too, so erasing every ticket of a content leaves neither its text nor its content key.
//! Their ledger rows stay without the key (cost, tokens, model, time): the spend survives.
//! A provider batch that holds an erased text is deleted by the worker once collected (within
//! its 24-hour window and a tick); the report names each such batch and when, and every local
//! classifier that learnt from an erased text (`cascade::trained_on`).
//! Run by `triage erase` / the ops Lambda, and by the sweeper for ticket retention
//! (`TRIAGE_TICKET_RETENTION_SECONDS`), in batches.

use std::time::Duration;

use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;
use uuid::Uuid;

use crate::{
    db,
    domain::{error::Result, ticket::TicketId},
    pipeline::{
        cascade::trained_on::{self, TrainedClassifier},
        ledger,
        outbox::submission::{self, HeldAtProvider},
    },
};

/// What an erasure removed.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Erased {
    pub tickets: i64,
    /// Asked for but not there (erased before, or never created).
    pub not_found: Vec<TicketId>,
    pub request_keys: i64,
    /// Results and jobs of contents no ticket refers to any more.
    pub results: i64,
    pub jobs: i64,
    /// Ledger rows of those contents, kept without their key: the money stays counted.
    pub ledger_rows: i64,
    /// Results and jobs handed over to another ticket of the same content.
    pub kept_for_other_tickets: i64,
    /// Provider batches that still hold an erased text, each with the time by which the
    /// worker deletes it there.
    pub held_at_provider: Vec<HeldAtProvider>,
    /// Local classifiers that learnt from an erased ticket's text (with how many of them), or
    /// may have (`tickets: null`: stored before V29 recorded tickets, trained from the database
    /// after the ticket existed). They keep what they learnt until retired
    /// (`triage models retire`); `triage models` shows their `erased_tickets`.
    pub classifiers_trained_on: Vec<TrainedClassifier>,
}

impl Erased {
    fn add(&mut self, other: Erased) {
        self.tickets += other.tickets;
        self.not_found.extend(other.not_found);
        self.request_keys += other.request_keys;
        self.results += other.results;
        self.jobs += other.jobs;
        self.ledger_rows += other.ledger_rows;
        self.kept_for_other_tickets += other.kept_for_other_tickets;
        self.held_at_provider.extend(other.held_at_provider);
        for classifier in other.classifiers_trained_on {
            match self
                .classifiers_trained_on
                .iter_mut()
                .find(|c| c.version == classifier.version)
            {
                Some(seen) => {
                    seen.tickets = match (seen.tickets, classifier.tickets) {
                        (Some(a), Some(b)) => Some(a + b),
                        (a, b) => a.or(b),
                    }
                }
                None => self.classifiers_trained_on.push(classifier),
            }
        }
    }
}

/// Ingest (and reprocess) link new tickets to existing keys; while an erasure decides which
/// keys are orphaned, none may be linked, or a new duplicate could lose the job it counts on.
/// The lock also orders concurrent erasures. Ingest waits for the few statements below.
const LOCK_LINKS: &str = "LOCK TABLE ticket_evaluation IN SHARE ROW EXCLUSIVE MODE";

const FORGET_REQUEST_KEYS: &str = "DELETE FROM request_idempotency WHERE ticket_id = ANY($1)";

const UNLINK: &str = r#"
WITH unlinked AS (
    DELETE FROM ticket_evaluation WHERE ticket_id = ANY($1) RETURNING idempotency_key
)
SELECT DISTINCT idempotency_key FROM unlinked
"#;

/// Jobs and results of keys another ticket still links to now name that ticket (the oldest
/// link): the worker reads the text through the job's ticket.
const HAND_OVER: &str = r#"
WITH heir AS (
    SELECT DISTINCT ON (idempotency_key) idempotency_key, ticket_id
    FROM ticket_evaluation WHERE idempotency_key = ANY($1)
    ORDER BY idempotency_key, created_at, ticket_id
), jobs AS (
    UPDATE evaluation_outbox o SET ticket_id = heir.ticket_id FROM heir
    WHERE o.idempotency_key = heir.idempotency_key AND o.ticket_id = ANY($2)
    RETURNING 1
), results AS (
    UPDATE evaluation_result r SET ticket_id = heir.ticket_id FROM heir
    WHERE r.idempotency_key = heir.idempotency_key AND r.ticket_id = ANY($2)
    RETURNING 1
)
SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM results)
"#;

/// Keys no ticket links to any more lose their job, result and audit draw (their ledger rows their key,
/// [`ledger::forget_keys`]); whatever still names an erased ticket goes too (nothing should,
/// the foreign keys would refuse the delete). Returns the orphaned keys, and the batch
/// submissions the dropped jobs were sent in.
const DROP_ORPHANS: &str = r#"
WITH orphan AS (
    SELECT k FROM unnest($1::text[]) k
    WHERE NOT EXISTS (SELECT 1 FROM ticket_evaluation te WHERE te.idempotency_key = k)
), jobs AS (
    DELETE FROM evaluation_outbox
    WHERE idempotency_key IN (SELECT k FROM orphan) OR ticket_id = ANY($2)
    RETURNING batch_submission_id
), results AS (
    DELETE FROM evaluation_result
    WHERE idempotency_key IN (SELECT k FROM orphan) OR ticket_id = ANY($2)
    RETURNING idempotency_key
), audits AS (
    DELETE FROM cascade_audit
    WHERE idempotency_key IN (SELECT k FROM orphan)
       OR idempotency_key IN (SELECT idempotency_key FROM results)
)
SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM results),
       (SELECT coalesce(array_agg(k), '{}') FROM orphan),
       (SELECT coalesce(array_agg(DISTINCT batch_submission_id), '{}') FROM jobs
        WHERE batch_submission_id IS NOT NULL)
"#;

const DELETE_TICKETS: &str = "DELETE FROM ticket WHERE id = ANY($1) RETURNING id";

/// Erases `tickets` (see the module), all or nothing.
pub async fn erase(pool: &Pool, tickets: &[TicketId]) -> Result<Erased> {
    let mut client = db::client(pool).await?;
    let transaction = client.transaction().await?;
    let erased = erase_in(&transaction, tickets).await?;
    transaction.commit().await?;
    Ok(erased)
}

async fn erase_in(client: &impl GenericClient, tickets: &[TicketId]) -> Result<Erased> {
    let ids: Vec<Uuid> = tickets.iter().map(|t| t.0).collect();
    client.batch_execute(LOCK_LINKS).await?;
    let request_keys = client.execute(FORGET_REQUEST_KEYS, &[&ids]).await? as i64;
    let keys: Vec<String> = client
        .query(UNLINK, &[&ids])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let kept: i64 = client.query_one(HAND_OVER, &[&keys, &ids]).await?.get(0);
    let orphans = client.query_one(DROP_ORPHANS, &[&keys, &ids]).await?;
    let ledger_rows = ledger::forget_keys(client, &orphans.get::<_, Vec<String>>(2)).await?;
    let held_at_provider =
        submission::held_at_provider(client, &orphans.get::<_, Vec<i64>>(3)).await?;
    let classifiers_trained_on = trained_on::forget(client, &ids).await?;
    let deleted: Vec<Uuid> = client
        .query(DELETE_TICKETS, &[&ids])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let not_found = tickets
        .iter()
        .filter(|t| !deleted.contains(&t.0))
        .copied()
        .collect();
    Ok(Erased {
        tickets: deleted.len() as i64,
        not_found,
        request_keys,
        results: orphans.get(1),
        jobs: orphans.get(0),
        ledger_rows,
        kept_for_other_tickets: kept,
        held_at_provider,
        classifiers_trained_on,
    })
}

/// Served by `idx_ticket_created`, oldest first.
const EXPIRED_TICKETS: &str = r#"
SELECT id FROM ticket WHERE created_at < now() - make_interval(secs => $1)
ORDER BY created_at, id LIMIT $2
"#;

/// Ticket retention: erases tickets older than `keep`, `batch` per transaction, at most
/// `max_batches` per sweep (the next sweep goes on).
pub async fn erase_expired(
    pool: &Pool,
    keep: Duration,
    batch: i64,
    max_batches: u32,
) -> Result<Erased> {
    let mut total = Erased::default();
    for _ in 0..max_batches {
        let mut client = db::client(pool).await?;
        let transaction = client.transaction().await?;
        let ids: Vec<TicketId> = transaction
            .query(EXPIRED_TICKETS, &[&keep.as_secs_f64(), &batch])
            .await?
            .iter()
            .map(|row| TicketId(row.get(0)))
            .collect();
        let erased = erase_in(&transaction, &ids).await?;
        transaction.commit().await?;
        let last = (erased.tickets) < batch;
        total.add(erased);
        if last {
            break;
        }
    }
    Ok(total)
}
