//! The invocation loop every runner of the pipeline shares (`triage worker` and `triage
//! deliver` without `--once`, and the local server's): invocations back to back until
//! stopped, a database that is away waited for.

use std::{
    future::Future,
    time::{Duration, Instant},
};

use tokio_util::sync::CancellationToken;

use crate::domain::error::Result;

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
