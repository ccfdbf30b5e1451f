//! What every Lambda binary does at init and per invocation, beyond the library call.

use std::time::{Duration, Instant, SystemTime};

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
/// A deadline already past when the invocation starts is no real Lambda's (cargo-lambda's
/// emulator sends `Lambda-Runtime-Deadline-Ms: 600000`, in 1970): `fallback` from now
/// instead, with a warning, rather than an invocation that does nothing and says nothing.
pub fn deadline(context: &lambda_runtime::Context, fallback: Duration) -> Instant {
    Instant::now() + time_left(context.deadline(), SystemTime::now(), fallback)
}

fn time_left(deadline: SystemTime, now: SystemTime, fallback: Duration) -> Duration {
    match deadline.duration_since(now) {
        Ok(left) => left,
        Err(_) => {
            tracing::warn!(
                deadline_ms = deadline
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                fallback_seconds = fallback.as_secs_f64(),
                "the invocation's deadline has already passed (a local emulator?): using TRIAGE_INVOCATION_SECONDS"
            );
            fallback
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_in_the_past_falls_back_to_the_configured_budget() {
        let now = SystemTime::now();
        let fallback = Duration::from_secs(60);
        let emulator = SystemTime::UNIX_EPOCH + Duration::from_millis(600_000);
        assert_eq!(time_left(emulator, now, fallback), fallback);
        let real = now + Duration::from_secs(90);
        assert_eq!(time_left(real, now, fallback), Duration::from_secs(90));
    }
}
