//! `triage worker` without `--once`: invocations back to back until stopped.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Worker;
use crate::{domain::error::Result, evaluate::Provider};

/// Invocations back to back until `stop`, idling briefly when there is nothing to do.
/// In-flight work finishes before it returns.
pub async fn run_until_stopped<P: Provider>(
    worker: &Worker<P>,
    idle: Duration,
    stop: CancellationToken,
) -> Result<()> {
    while !stop.is_cancelled() {
        let deadline = Instant::now() + worker.config.worker.invocation_budget;
        let report = worker.run_invocation(deadline, &stop).await;
        match report {
            Ok(report) if report.claimed > 0 && !report.paused && !report.database_away => continue,
            Ok(_) => {}
            Err(error) if error.is_unavailable() => {
                tracing::warn!(error = %error.report(), "database unavailable; retrying")
            }
            Err(error) => return Err(error),
        }
        tokio::select! { _ = stop.cancelled() => {}, _ = tokio::time::sleep(idle) => {} }
    }
    Ok(())
}
