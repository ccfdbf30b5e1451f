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
    domain::{
        error::Result,
        key::IdempotencyKey,
        versions::{PolicyVersion, VersionPair},
    },
    pipeline::outbox::requeue::{enqueue, Batch},
    pipeline::outbox::{Lane, Work},
};

/// What to reprocess, and how.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Tickets created at or after this time.
    pub since: DateTime<Utc>,
    pub versions: VersionPair,
    /// The policy the new jobs are answered under (their keys name it).
    pub policy: PolicyVersion,
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
                IdempotencyKey::derive_under(
                    row.get(2),
                    row.get(3),
                    plan.versions.prompt_version.as_str(),
                    plan.versions.model_version.as_str(),
                    plan.policy.as_str(),
                )
                .to_string()
            })
            .collect();
        let batch = Batch {
            ticket_ids: &ids,
            keys: &keys,
            versions: &plan.versions,
            policy: plan.policy.as_str(),
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
