//! Sweeper Lambda (EventBridge schedule): returns expired leases, reports queue health.

use lambda_runtime::{service_fn, LambdaEvent};
use triage::{config::Config, db, sweep, telemetry};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let config = Config::from_env()?;
    let pool = db::pool(&config.database)?;
    let (pool, config) = (&pool, &config);
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<serde_json::Value>| async move {
            sweep::return_expired_leases(pool, &config.worker).await
        },
    ))
    .await
}
