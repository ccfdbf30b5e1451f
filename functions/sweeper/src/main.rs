//! Sweeper Lambda (EventBridge schedule): expired leases back to the queue, retention,
//! queue health and the dead-letter report as EMF metrics and a log line; with the batch tier,
//! the provider batches polled and collected, bounded by the Lambda deadline; eval runs whose
//! answers are all in, concluded (`operations::sweep`).

use std::sync::Arc;

use lambda_runtime::{service_fn, LambdaEvent};
use triage::{
    aws::lambda::{self, config_from_env},
    db, operations,
    pipeline::sweep::Sweeper,
    telemetry,
};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let metrics = telemetry::lambda_metrics("sweeper")?;
    let config = Arc::new(config_from_env().await?);
    let fallback = config.worker.invocation_budget;
    let sweeper = Sweeper::new(db::pool(&config.database)?, config)?;
    let sweeper = &sweeper;
    let handler = service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        operations::sweep(sweeper, lambda::deadline(&event.context, fallback)).await
    });
    metrics_cloudwatch_embedded::lambda::service::run(metrics, handler).await
}
