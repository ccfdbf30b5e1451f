//! Deliverer Lambda (the sweeper's schedule): clients (database, EventBridge) built once per
//! container, then one deliverer invocation per event, bounded by the Lambda deadline.

use std::sync::Arc;

use lambda_runtime::{service_fn, LambdaEvent};
use tokio_util::sync::CancellationToken;
use triage::{
    aws::{
        eventbridge,
        lambda::{self, config_from_env},
    },
    db, telemetry,
};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let metrics = telemetry::lambda_metrics("deliverer")?;
    let config = Arc::new(config_from_env().await?);
    let fallback = config.worker.invocation_budget;
    let deliverer = eventbridge::deliverer(db::pool(&config.database)?, config)?;
    let deliverer = &deliverer;
    let handler = service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        let deadline = lambda::deadline(&event.context, fallback);
        deliverer
            .run_invocation(deadline, &CancellationToken::new())
            .await
    });
    metrics_cloudwatch_embedded::lambda::service::run(metrics, handler).await
}
