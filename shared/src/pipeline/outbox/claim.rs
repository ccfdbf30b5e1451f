//! The claim (article step 3): one statement over the partial index on pending rows.
//! `SKIP LOCKED` gives concurrent workers disjoint batches; each claim gets a fresh token and
//! counts an attempt, so a crash (lease expiry) is an attempt too. Lanes are claimed one
//! after the other, interactive first (see [`lanes`]).

use std::time::Duration;

use deadpool_postgres::GenericClient;

use super::{
    lanes::{self, Lanes},
    lease::take_lease,
    ClaimedJob, Lane,
};
use crate::domain::{error::Result, versions::ModelVersion};

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
        -- The daily budget reserves this claim's estimate afresh (`budgeted::claim_within`).
        reserved_usd = NULL
    WHERE id IN (
        SELECT id FROM evaluation_outbox
        WHERE status = 'pending'
          AND lane = $5
          AND ($6 = 'any' OR online_only = ($6 = 'online_only'))
          AND available_at <= now()
          AND (model_version LIKE 'rules@%') = $4
          AND (NOT $7 OR workload = 'eval')
        ORDER BY available_at
        FOR UPDATE SKIP LOCKED
        LIMIT $3
    )
    RETURNING id, ticket_id, idempotency_key, prompt_version, model_version, attempts, claim_token,
              lane, policy_version
)
SELECT c.id, c.ticket_id, c.idempotency_key, c.prompt_version, c.model_version, c.attempts,
       c.claim_token, t.subject, t.message, c.lane, c.policy_version
FROM claimed c JOIN ticket t ON t.id = c.ticket_id
"#
);

/// Which of a lane's jobs a claim takes (`$6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Take {
    Any,
    /// Jobs that came back from a provider batch: the online path only.
    OnlineOnly,
    /// Jobs that may go into a provider batch.
    Batchable,
}

impl Take {
    fn as_str(self) -> &'static str {
        match self {
            Take::Any => "any",
            Take::OnlineOnly => "online_only",
            Take::Batchable => "batchable",
        }
    }
}

/// Claims at most `batch` jobs for online calls, interactive ones first; bulk ones only as far
/// as [`lanes::bulk_allowance`] lets them (a second statement, skipped when the interactive
/// lane filled the claim). A paused lane is not claimed from.
pub async fn claim(
    client: &impl GenericClient,
    worker: &str,
    batch: i64,
    lease: Duration,
    serves: Serves,
    lanes: Lanes,
) -> Result<Vec<ClaimedJob>> {
    let mut jobs = Vec::new();
    if !lanes.paused.interactive {
        let interactive = (Lane::Interactive, Take::Any, lanes.eval_only);
        jobs = claim_lane(client, worker, batch, lease, serves, interactive).await?;
    }
    let bulk = lanes::bulk_allowance(batch, jobs.len() as i64, lanes.bulk_share);
    if bulk > 0 && !lanes.paused.bulk {
        let take = match lanes.bulk_in_batches {
            true => Take::OnlineOnly,
            false => Take::Any,
        };
        let bulk_lane = (Lane::Bulk, take, lanes.eval_only);
        jobs.extend(claim_lane(client, worker, bulk, lease, serves, bulk_lane).await?);
    }
    Ok(jobs)
}

/// Claims at most `lines` bulk jobs for a provider batch, under a lease that outlasts the
/// batch's window.
pub async fn claim_for_batch(
    client: &impl GenericClient,
    worker: &str,
    lines: i64,
    lease: Duration,
    serves: Serves,
) -> Result<Vec<ClaimedJob>> {
    let bulk = (Lane::Bulk, Take::Batchable, false);
    claim_lane(client, worker, lines, lease, serves, bulk).await
}

/// One lane's claim: one statement over the partial index on pending rows of the lane.
async fn claim_lane(
    client: &impl GenericClient,
    worker: &str,
    batch: i64,
    lease: Duration,
    serves: Serves,
    (lane, take, eval_only): (Lane, Take, bool),
) -> Result<Vec<ClaimedJob>> {
    let rules = serves == Serves::RulesOnly;
    // Prepared once per connection (deadpool's statement cache), not on every claim.
    let statement = client.prepare_cached(CLAIM).await?;
    let rows = client
        .query(
            &statement,
            &[
                &worker,
                &lease.as_secs_f64(),
                &batch,
                &rules,
                &lane.as_str(),
                &take.as_str(),
                &eval_only,
            ],
        )
        .await?;
    Ok(rows.iter().map(ClaimedJob::from_row).collect())
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
