//! Reprocessing as a routine (article step 6): every ticket since a point in time is queued
//! again under a new prompt/model version. The new versions give new keys, so this is an
//! insert: `ON CONFLICT DO NOTHING` makes a second run add nothing, keys that already have a
//! result get their link but no job, and the old results stay for `shadow`.
//!
//! Tickets are read in keyset-paginated batches and each batch is written by one statement,
//! so 200k tickets are neither held in memory nor written in one long transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;
use uuid::Uuid;

use crate::{
    db,
    domain::{error::Result, key::IdempotencyKey, versions::VersionPair},
    pipeline::outbox::{Lane, Work},
};

/// What to reprocess, and how.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Tickets created at or after this time.
    pub since: DateTime<Utc>,
    pub versions: VersionPair,
    /// New jobs become claimable at a random point within this window, so a large reprocess
    /// does not hit the provider at once.
    pub spread: Duration,
    /// The lane of the new jobs: bulk unless the operator needs them ahead of it.
    pub lane: Lane,
    pub batch_size: i64,
    /// Count what would happen, write nothing.
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub versions: VersionPair,
    pub since: DateTime<Utc>,
    pub dry_run: bool,
    pub batches: i64,
    pub tickets: i64,
    /// New jobs: at most this many calls will be billed.
    pub inserted: i64,
    /// Tickets whose key was already queued or evaluated under these versions (by an earlier
    /// run, or by a duplicate in an earlier batch): nothing to do.
    pub already_queued: i64,
    /// New ticket → key links; every ticket, duplicates included, shows its content's result.
    pub links_added: i64,
}

/// Keyset pagination in `idx_ticket_created` order; the first page starts at `since` with the
/// nil id, which no ticket has.
const NEXT_TICKETS: &str = r#"
SELECT id, created_at, subject, message
FROM ticket
WHERE (created_at, id) > ($1, $2) AND workload = 'production'
ORDER BY created_at, id
LIMIT $3
"#;

/// One batch in one statement. Every CTE sees the snapshot from before the inserts, so `known`
/// means "queued or evaluated before this batch". A dry run is this same statement with its
/// writes switched off (`$6`), so its counts are what the real run would do. `triage eval`
/// queues its jobs with it too, as bulk eval work (`$7`, `$8`).
const ENQUEUE_BATCH: &str = r#"
WITH input AS (
    SELECT i.ticket_id, i.idempotency_key,
           EXISTS (SELECT 1 FROM evaluation_outbox o WHERE o.idempotency_key = i.idempotency_key)
        OR EXISTS (SELECT 1 FROM evaluation_result r WHERE r.idempotency_key = i.idempotency_key)
           AS known,
           EXISTS (SELECT 1 FROM ticket_evaluation te
                   WHERE te.ticket_id = i.ticket_id AND te.idempotency_key = i.idempotency_key)
           AS linked
    FROM unnest($1::uuid[], $2::text[]) AS i (ticket_id, idempotency_key)
), link AS (
    INSERT INTO ticket_evaluation (ticket_id, idempotency_key, prompt_version, model_version)
    SELECT ticket_id, idempotency_key, $3, $4 FROM input WHERE NOT $6
    ON CONFLICT DO NOTHING
    RETURNING 1
), job AS (
    INSERT INTO evaluation_outbox
        (ticket_id, idempotency_key, prompt_version, model_version, available_at, lane, workload)
    SELECT ticket_id, idempotency_key, $3, $4, now() + random() * make_interval(secs => $5), $7, $8
    FROM input WHERE NOT known AND NOT $6
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING 1
)
SELECT CASE WHEN $6 THEN (SELECT count(*) FROM input WHERE NOT linked)
            ELSE (SELECT count(*) FROM link) END,
       CASE WHEN $6 THEN (SELECT count(DISTINCT idempotency_key) FROM input WHERE NOT known)
            ELSE (SELECT count(*) FROM job) END,
       (SELECT count(*) FROM input WHERE known)
"#;

/// Tickets to queue under `versions`, with their keys under them.
pub struct Batch<'a> {
    pub ticket_ids: &'a [Uuid],
    pub keys: &'a [String],
    pub versions: &'a VersionPair,
    pub spread: Duration,
    pub work: Work,
}

/// What [`enqueue`] did (or, dry, would do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    pub links_added: i64,
    pub inserted: i64,
    pub already_queued: i64,
}

/// Links every ticket of `batch` to its key and queues a job for each key neither queued nor
/// evaluated: one statement, so a second run adds nothing.
pub async fn enqueue(
    client: &impl GenericClient,
    batch: &Batch<'_>,
    dry_run: bool,
) -> Result<Enqueued> {
    let counts = client
        .query_one(
            ENQUEUE_BATCH,
            &[
                &batch.ticket_ids,
                &batch.keys,
                &batch.versions.prompt_version,
                &batch.versions.model_version,
                &batch.spread.as_secs_f64(),
                &dry_run,
                &batch.work.lane.as_str(),
                &batch.work.workload,
            ],
        )
        .await?;
    Ok(Enqueued {
        links_added: counts.get(0),
        inserted: counts.get(1),
        already_queued: counts.get(2),
    })
}

pub async fn reprocess(pool: &Pool, plan: &Plan) -> Result<Report> {
    let client = db::client(pool).await?;
    let mut report = Report {
        versions: plan.versions.clone(),
        since: plan.since,
        dry_run: plan.dry_run,
        batches: 0,
        tickets: 0,
        inserted: 0,
        already_queued: 0,
        links_added: 0,
    };
    let mut after = (plan.since, Uuid::nil());
    loop {
        let page = client
            .query(NEXT_TICKETS, &[&after.0, &after.1, &plan.batch_size])
            .await?;
        let Some(last) = page.last() else { break };
        after = (last.get(1), last.get(0));
        let ids: Vec<Uuid> = page.iter().map(|row| row.get(0)).collect();
        let keys: Vec<String> = page
            .iter()
            .map(|row| {
                IdempotencyKey::derive(
                    row.get(2),
                    row.get(3),
                    plan.versions.prompt_version.as_str(),
                    plan.versions.model_version.as_str(),
                )
                .to_string()
            })
            .collect();
        let batch = Batch {
            ticket_ids: &ids,
            keys: &keys,
            versions: &plan.versions,
            spread: plan.spread,
            work: Work {
                lane: plan.lane,
                ..Work::REPROCESS
            },
        };
        let counts = enqueue(&client, &batch, plan.dry_run).await?;
        report.batches += 1;
        report.tickets += page.len() as i64;
        report.links_added += counts.links_added;
        report.inserted += counts.inserted;
        report.already_queued += counts.already_queued;
        if (page.len() as i64) < plan.batch_size {
            break;
        }
    }
    tracing::info!(?report, "reprocess finished");
    Ok(report)
}
