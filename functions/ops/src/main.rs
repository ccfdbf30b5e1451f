//! Ops Lambda: the CLI's operations where RDS sits in private subnets. The payload is an
//! `ops::Request` (`{"op": "reprocess", ...}`, see docs/runbook.md), run by the same code as
//! `triage reprocess`, `shadow-diff`, `promote`, `redrive`, `stats` and `dead-letters`:
//! `aws lambda invoke --function-name <ops> --payload '{"op":"stats"}' out.json`.

use lambda_runtime::{service_fn, LambdaEvent};
use triage::{config::Config, db, ops, telemetry};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let metrics = telemetry::lambda_metrics("ops")?;
    let config = Config::load().await?;
    let pool = db::pool(&config.database)?;
    let (pool, config) = (&pool, &config);
    let handler = service_fn(move |event: LambdaEvent<ops::Request>| async move {
        ops::run(pool, config, event.payload).await
    });
    metrics_cloudwatch_embedded::lambda::service::run(metrics, handler).await
}
