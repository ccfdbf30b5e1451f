//! Sweeper Lambda (EventBridge schedule): expired leases back to the queue, retention,
//! queue health and the dead-letter report as EMF metrics and a log line.

use lambda_runtime::{service_fn, LambdaEvent};
use triage::{aws::lambda::config_from_env, db, pipeline::sweep, telemetry};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let metrics = telemetry::lambda_metrics("sweeper")?;
    let config = config_from_env().await?;
    let pool = db::pool(&config.database)?;
    let (pool, config) = (&pool, &config);
    let handler = service_fn(move |_: LambdaEvent<serde_json::Value>| async move {
        sweep::sweep(pool, config).await
    });
    metrics_cloudwatch_embedded::lambda::service::run(metrics, handler).await
}
