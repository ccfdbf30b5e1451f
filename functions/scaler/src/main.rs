//! Scaler Lambda (EventBridge schedule): sizes the worker fleet from the claimable backlog
//! and the provider's rate limit, and starts that many worker invocations through the
//! doorbell queue (docs/scaling.md); deliverers for waiting deliveries through theirs
//! (docs/delivery.md).

use lambda_runtime::{service_fn, LambdaEvent};
use triage::{
    aws::{
        doorbell::{self, Doorbells},
        lambda::config_from_env,
    },
    db, telemetry,
};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let metrics = telemetry::lambda_metrics("scaler")?;
    let config = config_from_env().await?;
    let pool = db::pool(&config.database)?;
    let doorbells = Doorbells::from_lookup(&config, |name| std::env::var(name).ok())?;
    let (pool, config, doorbells) = (&pool, &config, &doorbells);
    let handler = service_fn(move |_: LambdaEvent<serde_json::Value>| async move {
        doorbell::tick(pool, config, doorbells).await
    });
    metrics_cloudwatch_embedded::lambda::service::run(metrics, handler).await
}
