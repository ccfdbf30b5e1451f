//! Migrate Lambda: the `Migration` custom resource's handler (migrations on every deploy that
//! changes them). The contract and its rollback rule live in `triage::aws::migrate_resource`.

use lambda_runtime::{service_fn, LambdaEvent};
use triage::{
    aws::{
        lambda,
        migrate_resource::{self, Request},
    },
    telemetry, tls,
};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    let http = tls::https_client_builder().build()?;
    let version = std::env::var("AWS_LAMBDA_FUNCTION_VERSION").ok();
    let (http, version) = (&http, version.as_deref());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Request>| async move {
        let deadline = lambda::deadline(&event.context);
        migrate_resource::handle(
            event.payload,
            version,
            deadline,
            http,
            migrate_resource::migrate_from_env,
        )
        .await
    }))
    .await
}
