//! What an eval would queue, counted before it queues anything: the billed jobs (a content
//! key of a version that calls a provider, with no result and no job yet), so that a large
//! one is shown and confirmed as reprocess and redrive are (`operations`), and what the set
//! holds in memory (`operations::fits`).

use deadpool_postgres::Pool;

use super::{key, Plan};
use crate::{db, domain::error::Result};

/// Jobs the plan would queue that are billed calls: keys of versions other than the offline
/// rules, distinct, neither answered nor queued already (a rerun continues a run for free).
/// A cascade's keys count in full: which of them its classifier answers is known only after.
pub async fn billed_jobs(pool: &Pool, plan: &Plan) -> Result<i64> {
    let rows = plan.set.rows_of(plan.split);
    let mut keys: Vec<String> = plan
        .versions
        .iter()
        .filter(|v| !v.model_version.is_rules())
        .flat_map(|v| rows.iter().map(move |r| key(r, v, &plan.policy)))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.is_empty() {
        return Ok(0);
    }
    let client = db::client(pool).await?;
    let row = client
        .query_one(
            "SELECT count(*) FROM unnest($1::text[]) AS k (key)
             WHERE NOT EXISTS (SELECT 1 FROM evaluation_result r WHERE r.idempotency_key = k.key)
               AND NOT EXISTS (SELECT 1 FROM evaluation_outbox o WHERE o.idempotency_key = k.key)",
            &[&keys],
        )
        .await?;
    Ok(row.get(0))
}

/// The rows of the plan and the bytes of their text.
pub fn held(plan: &Plan) -> (u64, u64) {
    let rows = &plan.set.rows;
    let bytes = rows
        .iter()
        .map(|r| (r.subject.len() + r.message.len()) as u64)
        .sum();
    (rows.len() as u64, bytes)
}
