//! The sweeper (article step 3, "o varredor"): returns expired leases (jobs and deliveries)
//! to their queues, deletes
//! finished jobs past retention (and drops the ledger's days past it, creating days ahead), erases tickets past theirs (when set), forgets expired
//! request keys, and reports queue health. Its [`Sweeper::tick`] also polls and collects the
//! provider batches (the batch tier), so their results come in while no worker runs, and gives
//! a cascade's provisional answers to new tickets that waited too long.
//! A lease expiry means a worker died mid-job, so it counts as the attempt the claim already
//! added; at the maximum the job is dead-lettered as `lease_expired` instead of looping.

use std::{sync::Arc, time::Instant};

use deadpool_postgres::Pool;
use serde::Serialize;

use crate::{
    config::{Config, RetentionPolicy, WorkerPolicy},
    db,
    domain::error::Result,
    pipeline::{
        answering::Policies,
        batch_tier::{BatchReport, BatchTier},
        cascade::provisional::{self, Reason},
        erase, ingest, ledger,
        limits::caller_rate,
        outbox::{
            claim::Serves,
            lease::{self, Queue},
        },
        reads::report::{self, Health},
    },
    providers::Tier,
};

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LeaseReport {
    pub leases_returned: i64,
    pub leases_dead_lettered: i64,
    pub delivery_leases_returned: i64,
}

/// What one sweep did and saw; also the sweeper Lambda's response.
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    #[serde(flatten)]
    pub leases: LeaseReport,
    pub retention_deleted: u64,
    /// The ledger's daily partitions dropped past the same retention.
    pub ledger_partitions_dropped: i32,
    /// Tickets past `TRIAGE_TICKET_RETENTION_SECONDS`, erased with what only they referred to.
    pub tickets_erased: i64,
    pub request_keys_expired: u64,
    pub health: Health,
    pub dead_letters: Vec<report::DeadLetterGroup>,
    /// The provider batches polled and collected on this tick (none without the batch tier).
    pub batches: BatchReport,
    /// New tickets given a cascade's local answer as provisional after waiting past
    /// `TRIAGE_PROVISIONAL_AFTER_SECONDS`.
    pub provisional: u64,
}

/// The sweeper as its schedule runs it (the Lambda, `triage sweeper`, `triage dev`).
pub struct Sweeper {
    pool: Pool,
    config: Arc<Config>,
    /// With `TRIAGE_BULK_TIER=batch`: the batch tier, which the sweeper only collects from
    /// (submitting claims work, the fleet's part).
    batches: Option<BatchTier>,
}

impl Sweeper {
    /// Refuses what the batch tier would refuse when it is to collect batches.
    pub fn new(pool: Pool, config: Arc<Config>) -> Result<Self> {
        let batches = match config.worker.bulk_tier {
            Tier::Batch => {
                let caller = format!(
                    "sweeper-{}",
                    &uuid::Uuid::new_v4().simple().to_string()[..8]
                );
                let policies = Arc::new(Policies::new());
                BatchTier::new(pool.clone(), config.clone(), caller, policies)?
            }
            Tier::Online | Tier::Flex => None,
        };
        Ok(Self {
            pool,
            config,
            batches,
        })
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// One tick: the [`sweep`], then the batches' polling and collection (the batch tier's
    /// `collect`, bounded per tick, as a worker's), before `deadline`.
    pub async fn tick(&self, deadline: Instant) -> Result<SweepReport> {
        let mut report = sweep(&self.pool, &self.config).await?;
        let (versions, after) = (&self.config.versions, self.config.worker.provisional_after);
        // Like the batches, a failure here is the next tick's to retry; the sweep's report stands.
        match provisional::give(&self.pool, versions, Reason::Waiting, after).await {
            Ok(given) => report.provisional = given,
            Err(error) => tracing::warn!(error = %error.report(), "provisional answers not given"),
        }
        if let Some(tier) = &self.batches {
            report.batches = tier.collect(deadline).await?;
            if report.batches != BatchReport::default() {
                tracing::info!(batches = ?report.batches, "batches tended by the sweeper");
            }
        }
        Ok(report)
    }
}

pub async fn return_expired_leases(pool: &Pool, policy: &WorkerPolicy) -> Result<LeaseReport> {
    let client = db::client(pool).await?;
    let (returned, dead) =
        lease::return_expired(&client, Queue::Evaluation, policy.max_attempts).await?;
    // Deliveries end by age (the retry window), not by a count: a crash never kills one.
    let (deliveries_returned, _) =
        lease::return_expired(&client, Queue::Delivery, i32::MAX).await?;
    let report = LeaseReport {
        leases_returned: returned,
        leases_dead_lettered: dead,
        delivery_leases_returned: deliveries_returned,
    };
    if report != LeaseReport::default() {
        tracing::warn!(?report, "expired leases swept");
        lease::count_expired(report.leases_returned, report.leases_dead_lettered);
    }
    Ok(report)
}

/// Deletes finished jobs older than the retention, oldest first, one short statement per
/// batch. Results are kept: a duplicate arriving later is still a dedup hit.
pub async fn apply_retention(pool: &Pool, policy: &RetentionPolicy) -> Result<u64> {
    let client = db::client(pool).await?;
    let mut deleted = 0;
    for _ in 0..policy.max_batches_per_sweep {
        let n = client
            .execute(
                r#"
                DELETE FROM evaluation_outbox WHERE id IN (
                    SELECT id FROM evaluation_outbox
                    WHERE status = 'done' AND finished_at < now() - make_interval(secs => $1)
                    ORDER BY finished_at
                    LIMIT $2
                )
                "#,
                &[&policy.keep_done.as_secs_f64(), &policy.batch_size],
            )
            .await?;
        deleted += n;
        if (n as i64) < policy.batch_size {
            break;
        }
    }
    Ok(deleted)
}

/// One sweep: leases, retention, request keys, then the health report (logged and emitted
/// as metrics, so the on-call dashboard and alarms see it).
pub async fn sweep(pool: &Pool, config: &Config) -> Result<SweepReport> {
    let leases = return_expired_leases(pool, &config.worker).await?;
    let retention_deleted = apply_retention(pool, &config.retention).await?;
    let ledger_partitions_dropped = ledger::maintain_partitions(
        &db::client(pool).await?,
        ledger::PARTITIONS_AHEAD_DAYS,
        Some(config.retention.keep_done),
    )
    .await?;
    let retention = &config.retention;
    let tickets_erased = match retention.keep_tickets {
        Some(keep) => {
            erase::erase_expired(
                pool,
                keep,
                retention.batch_size,
                retention.max_batches_per_sweep,
            )
            .await?
            .tickets
        }
        None => 0,
    };
    let request_keys_expired =
        ingest::expire_request_keys(pool, config.retention.batch_size).await?;
    caller_rate::forget_past(pool, config.retention.batch_size).await?;
    let serves = Serves::for_model_version(&config.versions.model);
    let health = report::health(pool, serves, config.worker.daily_budget_usd).await?;
    let dead_letters =
        report::dead_letters(pool, std::time::Duration::from_secs(24 * 3600)).await?;
    health.emit();
    if !dead_letters.is_empty() {
        tracing::warn!(dead_letters = %serde_json::to_string(&dead_letters).unwrap_or_default(), "dead letters in the last day");
    }
    Ok(SweepReport {
        leases,
        retention_deleted,
        ledger_partitions_dropped,
        tickets_erased,
        request_keys_expired,
        health,
        dead_letters,
        batches: BatchReport::default(),
        provisional: 0,
    })
}
