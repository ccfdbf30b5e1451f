//! What every Lambda binary does at init and per invocation, beyond the library call.

use std::time::{Instant, SystemTime};

use crate::{aws::secrets, config::Config, domain::error::Result};

/// The configuration from the environment, with the secrets it names read from Secrets
/// Manager (once per container; again after a rotation). Without secret ARNs: no network.
pub async fn config_from_env() -> Result<Config> {
    let mut config = Config::from_env()?;
    // Boxed: the SDK's deeply nested futures would otherwise be part of every caller's.
    Box::pin(secrets::resolve(&mut config)).await?;
    Ok(config)
}

/// The invocation's deadline as an `Instant`, for budgets measured on the monotonic clock.
pub fn deadline(context: &lambda_runtime::Context) -> Instant {
    let left = context
        .deadline()
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    Instant::now() + left
}
