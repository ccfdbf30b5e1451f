//! API Lambda: build config and pool once per container, then serve the shared router.

use std::sync::Arc;

use triage::{aws::lambda::config_from_env, db, http, telemetry};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    telemetry::init();
    let metrics = telemetry::lambda_metrics("api")?;
    let config = config_from_env().await?;
    let pool = db::pool(&config.database)?;
    let router = http::router(http::AppState::new(pool, Arc::new(config)));
    metrics_cloudwatch_embedded::lambda::service::run_http(metrics, router).await
}
