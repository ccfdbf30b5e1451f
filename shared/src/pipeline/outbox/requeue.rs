//! Queueing tickets that exist under versions (reprocess, `triage eval`): every ticket linked
//! to its key under the versions, and a job for each key neither queued nor evaluated, in one
//! statement, so a second run adds nothing.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::Work;
use crate::domain::{error::Result, versions::VersionPair};

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
        (ticket_id, idempotency_key, prompt_version, model_version, available_at, lane, workload,
         policy_version)
    SELECT ticket_id, idempotency_key, $3, $4, now() + random() * make_interval(secs => $5), $7, $8,
           $9
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

/// Tickets to queue under `versions` and `policy`, with their keys under them.
pub struct Batch<'a> {
    pub ticket_ids: &'a [Uuid],
    pub keys: &'a [String],
    pub versions: &'a VersionPair,
    /// The policy the jobs are answered under (`pipeline::answering`).
    pub policy: &'a str,
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
                &batch.policy,
            ],
        )
        .await?;
    Ok(Enqueued {
        links_added: counts.get(0),
        inserted: counts.get(1),
        already_queued: counts.get(2),
    })
}
