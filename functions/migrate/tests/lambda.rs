//! The migrate Lambda as a deploy runs it: the real binary, its database login read from
//! Secrets Manager (moto), CloudFormation's custom resource events through the Runtime API
//! emulator, and the answers caught at a loopback ResponseURL.

use std::time::Duration;

use serde_json::{json, Value};
use testkit::{
    cloudformation::{event, ResponseUrl},
    lambda::Container,
};
use triage::aws::secrets::SecretsManager;

const TIMEOUT: Duration = Duration::from_secs(60);

/// The function version the binary runs as (Lambda's AWS_LAMBDA_FUNCTION_VERSION).
const VERSION: &str = "7";

async fn table_count(url: &str) -> i64 {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let sql = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'";
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// Stores the login of `url` (the local test server: its password, plain TCP) in the RDS shape.
async fn login_secret(moto: &[(&'static str, String)], url: &str) -> String {
    let lookup = |name: &str| {
        moto.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    let sm = SecretsManager::from_lookup(lookup).unwrap();
    let pg: tokio_postgres::Config = url.parse().unwrap();
    let tokio_postgres::config::Host::Tcp(host) = &pg.get_hosts()[0] else {
        panic!("a TCP test server")
    };
    let password = String::from_utf8(pg.get_password().unwrap().to_vec()).unwrap();
    let login = json!({"engine": "postgres", "username": pg.get_user().unwrap(),
                       "password": password, "host": host,
                       "port": pg.get_ports()[0].to_string(), "dbname": pg.get_dbname().unwrap()});
    let created = sm
        .client()
        .create_secret()
        .name(format!(
            "triage/migrate-test/{}",
            uuid::Uuid::new_v4().simple()
        ))
        .secret_string(login.to_string())
        .send()
        .await
        .unwrap();
    created.arn.unwrap()
}

#[tokio::test]
async fn a_deploy_migrates_with_the_login_from_secrets_manager_and_a_rollback_does_not() {
    let Some(moto) = testkit::moto::aws_env() else {
        return;
    };
    let url = testkit::fresh_database().await;
    let arn = login_secret(&moto, &url).await;
    let env = moto.iter().map(|(k, v)| (*k, v.as_str())).chain([
        ("TRIAGE_DB_SECRET_ARN", arn.as_str()),
        // The local server speaks no TLS; in AWS this is verify-full (template.yaml).
        ("TRIAGE_DB_TLS", "disable"),
        ("AWS_LAMBDA_FUNCTION_VERSION", VERSION),
    ]);
    let Container { runtime, function } =
        Container::start(env!("CARGO_BIN_EXE_triage-migrate"), env).await;
    function.print_init_and_size(&runtime).await;
    let s3 = ResponseUrl::start(0).await;

    // A rollback first: the properties of an older version leave the database alone.
    let rollback = runtime.invoke(event("Update", "6", &s3.url), TIMEOUT).await;
    assert_eq!(rollback.result.unwrap()["Status"], "SUCCESS");
    assert_eq!(table_count(&url).await, 0);

    let create = runtime
        .invoke(event("Create", VERSION, &s3.url), TIMEOUT)
        .await;
    let returned: Value = create.result.expect("the handler returns its answer");
    assert_eq!(returned["Status"], "SUCCESS", "{returned}");
    assert!(table_count(&url).await > 0);

    let answers = s3.answers();
    assert_eq!(
        answers.len(),
        2,
        "every request answered at the ResponseURL"
    );
    assert_eq!(answers[1].body, returned);
    assert!(answers[1].body["Data"]["Applied"].as_u64().unwrap() > 0);
}

/// This build's binary, which unwinds on panic, or `MIGRATE_BINARY`: the deployed build aborts
/// on panic, and the hook must answer before that. Built that way (with the debug-only panic
/// trigger) by `CARGO_PROFILE_DEV_PANIC=abort cargo build -p triage-migrate --target-dir
/// target/abort-check`, then `MIGRATE_BINARY=$PWD/target/abort-check/debug/triage-migrate`.
fn binary_under_test() -> String {
    std::env::var("MIGRATE_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_triage-migrate").into())
}

#[tokio::test]
async fn a_panic_in_the_migration_is_answered_failed_at_once_and_ends_the_process() {
    let url = testkit::fresh_database().await;
    let env = [
        ("DATABASE_URL", url.as_str()),
        ("AWS_LAMBDA_FUNCTION_VERSION", VERSION),
        // Honoured by debug builds only (src/main.rs).
        ("TRIAGE_TEST_PANIC_IN_MIGRATION", "1"),
    ];
    let Container {
        runtime,
        mut function,
    } = Container::start(binary_under_test(), env).await;
    let s3 = ResponseUrl::start(0).await;

    // The function never returns a result (it aborts, as the release profile would), so the
    // invocation runs on its own while the answer is awaited at the ResponseURL, well inside
    // the invocation's own timeout: CloudFormation is not left waiting for ServiceTimeout.
    let invocation = tokio::spawn({
        let event = event("Create", VERSION, &s3.url);
        async move { runtime.invoke(event, TIMEOUT).await }
    });
    let answers = s3.wait_for_answers(1, TIMEOUT / 2).await;
    let body = &answers[0].body;
    assert_eq!(body["Status"], "FAILED", "{body}");
    let reason = body["Reason"].as_str().unwrap();
    assert!(
        reason.contains("panicked") && reason.contains("TRIAGE_TEST_PANIC_IN_MIGRATION"),
        "{reason}"
    );
    assert_eq!(
        (
            body["RequestId"].as_str(),
            body["PhysicalResourceId"].as_str()
        ),
        (
            Some("unique-id-for-this-request"),
            Some("triage-migrations")
        )
    );
    assert_eq!(table_count(&url).await, 0, "nothing was migrated");
    let status = function.exit_status(TIMEOUT).await;
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(6),
        "SIGABRT, as with panic = \"abort\": {status:?}"
    );
    invocation.abort();
    // Exactly one answer: nothing else (a retry, a late success) reached the ResponseURL.
    assert_eq!(s3.requests(), 1);
}
