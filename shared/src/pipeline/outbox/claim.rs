//! The claim (article step 3): one statement over the partial index on pending rows.
//! `SKIP LOCKED` gives concurrent workers disjoint batches; each claim gets a fresh token and
//! counts an attempt, so a crash (lease expiry) is an attempt too. Lanes are claimed one
//! after the other, interactive first (see [`lanes`]).

use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;

use super::{lanes, ClaimedJob, Lane, OutboxId};
use crate::domain::{
    error::Result,
    key::IdempotencyKey,
    ticket::TicketId,
    versions::{ModelVersion, VersionPair},
};

/// Which jobs a worker may take: the offline classifier only serves its own model version,
/// real providers everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    RulesOnly,
    Models,
}

impl Serves {
    /// What a worker configured with `model_version` (`model@effort`) claims. The sweeper's
    /// queue report asks the same question, so its age metric counts only jobs that some
    /// deployed worker will take.
    pub fn for_model_version(model_version: &ModelVersion) -> Self {
        if model_version.is_rules() {
            Serves::RulesOnly
        } else {
            Serves::Models
        }
    }
}

const CLAIM: &str = r#"
WITH claimed AS (
    UPDATE evaluation_outbox
    SET status = 'processing',
        locked_by = $1,
        locked_until = now() + make_interval(secs => $2),
        claim_token = gen_random_uuid(),
        attempts = attempts + 1
    WHERE id IN (
        SELECT id FROM evaluation_outbox
        WHERE status = 'pending'
          AND lane = $5
          AND available_at <= now()
          AND (model_version LIKE 'rules@%') = $4
        ORDER BY available_at
        FOR UPDATE SKIP LOCKED
        LIMIT $3
    )
    RETURNING id, ticket_id, idempotency_key, prompt_version, model_version, attempts, claim_token,
              lane
)
SELECT c.id, c.ticket_id, c.idempotency_key, c.prompt_version, c.model_version, c.attempts,
       c.claim_token, t.subject, t.message, c.lane
FROM claimed c JOIN ticket t ON t.id = c.ticket_id
"#;

/// Claims at most `batch` jobs, interactive ones first; bulk ones only as far as
/// [`lanes::bulk_allowance`] lets them (a second statement, skipped when the interactive lane
/// filled the claim).
pub async fn claim(
    client: &impl GenericClient,
    worker: &str,
    batch: i64,
    lease: Duration,
    serves: Serves,
    bulk_share: f64,
) -> Result<Vec<ClaimedJob>> {
    let mut jobs = claim_lane(client, worker, batch, lease, serves, Lane::Interactive).await?;
    let bulk = lanes::bulk_allowance(batch, jobs.len() as i64, bulk_share);
    if bulk > 0 {
        jobs.extend(claim_lane(client, worker, bulk, lease, serves, Lane::Bulk).await?);
    }
    Ok(jobs)
}

/// One lane's claim: one statement over the partial index on pending rows of the lane.
async fn claim_lane(
    client: &impl GenericClient,
    worker: &str,
    batch: i64,
    lease: Duration,
    serves: Serves,
    lane: Lane,
) -> Result<Vec<ClaimedJob>> {
    let rules = serves == Serves::RulesOnly;
    // Prepared once per connection (deadpool's statement cache), not on every claim.
    let statement = client.prepare_cached(CLAIM).await?;
    let lease_ends = Instant::now() + lease;
    let rows = client
        .query(
            &statement,
            &[
                &worker,
                &lease.as_secs_f64(),
                &batch,
                &rules,
                &lane.as_str(),
            ],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| ClaimedJob {
            id: OutboxId(row.get(0)),
            ticket_id: TicketId(row.get(1)),
            key: IdempotencyKey::from_stored(row.get(2)),
            versions: VersionPair {
                prompt_version: row.get(3),
                model_version: row.get(4),
            },
            attempts: row.get(5),
            claim_token: row.get(6),
            lease_ends,
            subject: row.get(7),
            message: row.get(8),
            lane: Lane::from_stored(row.get(9)),
        })
        .collect())
}
