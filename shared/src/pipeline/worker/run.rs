//! `triage worker` without `--once`: the worker's invocations back to back until stopped.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Worker;
use crate::{domain::error::Result, pipeline::invocation::back_to_back, providers::Provider};

/// The worker back to back, idling briefly when there is nothing to do or claiming paused.
pub async fn run_until_stopped<P: Provider>(
    worker: &Worker<P>,
    idle: Duration,
    stop: CancellationToken,
) -> Result<()> {
    let stop = &stop;
    back_to_back(
        worker.config.worker.invocation_budget,
        idle,
        stop,
        |deadline| async move {
            let report = worker.run_invocation(deadline, stop).await?;
            Ok(report.claimed > 0 && !report.paused && !report.database_away)
        },
    )
    .await
}
