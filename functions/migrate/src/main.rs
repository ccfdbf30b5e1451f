//! Migrate Lambda: the `Migration` custom resource's handler (migrations on every deploy that
//! changes them). The contract and its rollback rule live in `triage::aws::migrate_resource`.

use std::time::Duration;

use lambda_runtime::{service_fn, LambdaEvent};
use triage::{
    aws::{
        lambda,
        migrate_resource::{self, Request},
    },
    telemetry, tls,
};

/// The budget when the runtime's deadline has already passed (a local emulator): the
/// function's timeout in template.yaml.
const LOCAL_BUDGET: Duration = Duration::from_secs(300);

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init();
    migrate_resource::install_panic_hook();
    let http = tls::https_client_builder().build()?;
    let version = std::env::var("AWS_LAMBDA_FUNCTION_VERSION").ok();
    let region = std::env::var("AWS_REGION").ok();
    let (http, version, region) = (&http, version.as_deref(), region.as_deref());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Request>| async move {
        let deadline = lambda::deadline(&event.context, LOCAL_BUDGET);
        migrate_resource::handle(event.payload, version, region, deadline, http, migrate).await
    }))
    .await
}

async fn migrate() -> triage::Result<usize> {
    // The only way the tests can make a migration panic (functions/migrate/tests/lambda.rs).
    // Compiled into debug builds only: `sam build` deploys release builds, where no variable
    // can crash a deploy.
    #[cfg(debug_assertions)]
    if std::env::var_os("TRIAGE_TEST_PANIC_IN_MIGRATION").is_some() {
        panic!("TRIAGE_TEST_PANIC_IN_MIGRATION is set");
    }
    migrate_resource::migrate_from_env().await
}
