//! Worker Lambda (EventBridge schedule): clients built once per container, then one worker
//! invocation per event, bounded by the Lambda deadline.

use std::sync::Arc;

use lambda_runtime::{service_fn, LambdaEvent};
use tokio_util::sync::CancellationToken;
use triage::{
    aws::lambda::{self, config_from_env},
    db,
    pipeline::worker::Worker,
    providers::AnyProvider,
    telemetry,
};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let metrics = telemetry::lambda_metrics("worker")?;
    let config = Arc::new(config_from_env().await?);
    let provider = AnyProvider::from_config(&config.provider, config.worker.call_timeout)?;
    let fallback = config.worker.invocation_budget;
    let worker = Worker::new(db::pool(&config.database)?, provider, config)?;
    let worker = &worker;
    let handler = service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        let deadline = lambda::deadline(&event.context, fallback);
        worker
            .run_invocation(deadline, &CancellationToken::new())
            .await
    });
    metrics_cloudwatch_embedded::lambda::service::run(metrics, handler).await
}
