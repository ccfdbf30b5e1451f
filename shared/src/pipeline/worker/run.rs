//! `triage worker` (and `triage deliver`) without `--once`: invocations back to back until
//! stopped.

use std::{
    future::Future,
    time::{Duration, Instant},
};

use tokio_util::sync::CancellationToken;

use super::Worker;
use crate::{domain::error::Result, providers::Provider};

/// Invocations of `budget` each until `stop`: again at once while `invoke` answers that there
/// is more to do, else after `idle`; a database that is away is waited for. In-flight work
/// finishes before it returns (each invocation sees `stop`).
pub async fn back_to_back<F, Fut>(
    budget: Duration,
    idle: Duration,
    stop: &CancellationToken,
    mut invoke: F,
) -> Result<()>
where
    F: FnMut(Instant) -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    while !stop.is_cancelled() {
        match invoke(Instant::now() + budget).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(error) if error.is_unavailable() => {
                tracing::warn!(error = %error.report(), "database unavailable; retrying")
            }
            Err(error) => return Err(error),
        }
        tokio::select! { _ = stop.cancelled() => {}, _ = tokio::time::sleep(idle) => {} }
    }
    Ok(())
}

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
