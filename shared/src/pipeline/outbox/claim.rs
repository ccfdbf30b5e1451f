//! The claim (article step 3): one statement over the partial index on pending rows.
//! `SKIP LOCKED` gives concurrent workers disjoint batches; each claim gets a fresh token and
//! counts an attempt, so a crash (lease expiry) is an attempt too.

use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;

use super::{lease::take_lease, ClaimedJob, OutboxId};
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

const CLAIM: &str = concat!(
    r#"
WITH claimed AS (
    UPDATE evaluation_outbox
    SET "#,
    take_lease!(),
    r#",
        -- The daily budget reserves this claim's estimate afresh (`budget::claim_within`).
        reserved_usd = NULL
    WHERE id IN (
        SELECT id FROM evaluation_outbox
        WHERE status = 'pending'
          AND available_at <= now()
          AND (model_version LIKE 'rules@%') = $4
        ORDER BY available_at
        FOR UPDATE SKIP LOCKED
        LIMIT $3
    )
    RETURNING id, ticket_id, idempotency_key, prompt_version, model_version, attempts, claim_token
)
SELECT c.id, c.ticket_id, c.idempotency_key, c.prompt_version, c.model_version, c.attempts,
       c.claim_token, t.subject, t.message
FROM claimed c JOIN ticket t ON t.id = c.ticket_id
"#
);

pub async fn claim(
    client: &impl GenericClient,
    worker: &str,
    batch: i64,
    lease: Duration,
    serves: Serves,
) -> Result<Vec<ClaimedJob>> {
    let rules = serves == Serves::RulesOnly;
    // Prepared once per connection (deadpool's statement cache), not on every claim.
    let statement = client.prepare_cached(CLAIM).await?;
    let lease_ends = Instant::now() + lease;
    let rows = client
        .query(&statement, &[&worker, &lease.as_secs_f64(), &batch, &rules])
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
        })
        .collect())
}

/// Gives claimed jobs back as if they had never been claimed (the attempt too), inside the
/// claim's own transaction: no other worker has seen them. No statement for none.
const UNCLAIM: &str = r#"
UPDATE evaluation_outbox
SET status = 'pending', locked_by = NULL, locked_until = NULL, claim_token = NULL,
    attempts = attempts - 1
WHERE id = ANY($1) AND status = 'processing'
"#;

pub async fn unclaim(client: &impl GenericClient, jobs: &[ClaimedJob]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = jobs.iter().map(|job| job.id.0).collect();
    client.execute(UNCLAIM, &[&ids]).await?;
    Ok(())
}
