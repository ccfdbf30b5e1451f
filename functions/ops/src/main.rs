//! Ops Lambda: the CLI's operations where RDS sits in private subnets. The payload is an
//! `operations::Request` (`{"op": "reprocess", ...}`, see docs/runbook.md), run by the same code as
//! `triage reprocess`, `shadow-diff`, `promote`, `redrive`, `stats`, `dead-letters`, `erase`,
//! `pause`, `resume`, `audit`, `train`, `models` (and `models retire`, `models switch`),
//! `retrain` (which the template's `RetrainSchedule` sends) and `eval` (which here queues its jobs, records the run and
//! answers at once with its id: the fleet answers, the sweeper concludes; `"set": "shipped"`
//! or `"s3://BUCKET/KEY"`), each run recorded in the audit trail:
//! `aws lambda invoke --function-name <ops> --payload '{"op":"stats"}' out.json`.

use lambda_runtime::{service_fn, LambdaEvent};
use triage::{aws::lambda::config_from_env, db, operations, telemetry};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let metrics = telemetry::lambda_metrics("ops")?;
    let config = config_from_env().await?;
    let pool = db::pool(&config.database)?;
    let (pool, config) = (&pool, &config);
    let handler = service_fn(move |event: LambdaEvent<operations::Request>| async move {
        let mut operator = operations::Operator::lambda(
            &event.context.invoked_function_arn,
            &event.context.request_id,
        );
        // The function's memory, when the runtime says (0: it does not; 256 is assumed).
        if let Ok(memory_mb @ 1..) = u32::try_from(event.context.env_config.memory) {
            operator = operator.with_memory_mb(memory_mb);
        }
        operations::run(pool, config, event.payload, &operator).await
    });
    metrics_cloudwatch_embedded::lambda::service::run(metrics, handler).await
}
