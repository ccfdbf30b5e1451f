//! `triage-migrate` as CloudFormation calls it: a custom resource request in, migrations
//! applied (or deliberately not), and the answer PUT to the ResponseURL, here a loopback
//! server standing in for S3.

use std::time::{Duration, Instant};

use testkit::cloudformation::{event, ResponseUrl};
use triage::{
    aws::migrate_resource::{handle, Request, Status, PHYSICAL_RESOURCE_ID},
    config::Config,
    db,
};

use crate::helpers::{fresh_database, unreachable_config};

const FUNCTION_VERSION: &str = "7";

/// Handles a `kind` request for function version `version` against `config`'s database,
/// with a minute to go before the deadline (unless `deadline` says otherwise).
async fn run(kind: &str, version: &str, s3: &ResponseUrl, config: &Config) -> Status {
    run_within(kind, version, s3, config, Duration::from_secs(60)).await
}

async fn run_within(
    kind: &str,
    version: &str,
    s3: &ResponseUrl,
    config: &Config,
    deadline: Duration,
) -> Status {
    let request: Request = serde_json::from_value(event(kind, version, &s3.url))
        .expect("the handler reads CloudFormation's event");
    let response = handle(
        request,
        Some(FUNCTION_VERSION),
        Some("eu-west-1"),
        Instant::now() + deadline,
        &triage::tls::https_client_builder().build().unwrap(),
        || db::migrate(&config.database),
    )
    .await
    .expect("the answer is delivered");
    response.status
}

async fn table_count(config: &Config) -> i64 {
    let client = db::pool(&config.database).unwrap().get().await.unwrap();
    client
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn create_applies_the_migrations_and_answers_success() {
    let config = Config::local(&fresh_database().await);
    let s3 = ResponseUrl::start(0).await;
    let status = run("Create", FUNCTION_VERSION, &s3, &config).await;
    assert_eq!(status, Status::Success);
    assert!(table_count(&config).await > 0);

    let answers = s3.answers();
    let (content_type, answer) = (&answers[0].content_type, &answers[0].body);
    assert_eq!(
        content_type.as_deref(),
        Some(""),
        "the pre-signed URL signs no content type"
    );
    assert_eq!(answer["Status"], "SUCCESS");
    assert_eq!(answer["PhysicalResourceId"], PHYSICAL_RESOURCE_ID);
    assert_eq!(answer["RequestId"], "unique-id-for-this-request");
    assert_eq!(answer["LogicalResourceId"], "Migration");
    assert!(answer["StackId"]
        .as_str()
        .unwrap()
        .contains(":stack/triage/"));
    assert!(answer["Data"]["Applied"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn a_second_update_is_a_successful_no_op() {
    let config = Config::local(&fresh_database().await);
    let s3 = ResponseUrl::start(0).await;
    for kind in ["Create", "Update"] {
        let status = run(kind, FUNCTION_VERSION, &s3, &config).await;
        assert_eq!(status, Status::Success);
    }
    assert_eq!(s3.answers()[1].body["Data"]["Applied"], 0);
}

#[tokio::test]
async fn a_rollback_to_older_properties_answers_success_without_migrating() {
    let config = Config::local(&fresh_database().await);
    let s3 = ResponseUrl::start(0).await;
    assert_eq!(run("Update", "6", &s3, &config).await, Status::Success);
    assert_eq!(table_count(&config).await, 0);
    assert!(s3.answers()[0].body["Reason"]
        .as_str()
        .unwrap()
        .contains("rollback"));
}

#[tokio::test]
async fn delete_answers_success_and_touches_nothing() {
    let config = Config::local(&fresh_database().await);
    let s3 = ResponseUrl::start(0).await;
    let status = run("Delete", FUNCTION_VERSION, &s3, &config).await;
    assert_eq!(status, Status::Success);
    assert_eq!(table_count(&config).await, 0);
}

#[tokio::test]
async fn a_failed_migration_answers_failed_with_the_reason() {
    let s3 = ResponseUrl::start(0).await;
    let status = run("Create", FUNCTION_VERSION, &s3, &unreachable_config()).await;
    assert_eq!(status, Status::Failed);
    let reason = s3.answers()[0].body["Reason"].as_str().unwrap().to_string();
    assert!(reason.contains("database unavailable"), "{reason}");
}

#[tokio::test]
async fn a_migration_that_cannot_finish_in_time_still_answers_before_the_deadline() {
    let url = fresh_database().await;
    let config = Config::local(&url);
    // Another deploy holds the migration lock for longer than this invocation lasts.
    let (holder, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&db::MIGRATION_LOCK_ID])
        .await
        .unwrap();
    let s3 = ResponseUrl::start(0).await;
    let started = Instant::now();
    let status = run_within(
        "Update",
        FUNCTION_VERSION,
        &s3,
        &config,
        Duration::from_secs(7),
    )
    .await;
    assert_eq!(status, Status::Failed);
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_refused_answer_is_delivered_again() {
    let config = Config::local(&fresh_database().await);
    let s3 = ResponseUrl::start(1).await;
    let status = run("Delete", FUNCTION_VERSION, &s3, &config).await;
    assert_eq!(status, Status::Success);
    assert_eq!((s3.requests(), s3.answers().len()), (2, 1));
}

#[tokio::test]
async fn a_request_naming_a_response_url_off_cloudformations_bucket_is_refused_and_migrates_nothing(
) {
    let config = Config::local(&fresh_database().await);
    for url in [
        "https://collector.example.com/answer",
        "http://s3.amazonaws.com/b/k",
        // Any S3 bucket is not CloudFormation's: an attacker's would collect the answer.
        "https://attacker-bucket.s3.amazonaws.com/k",
        // Nor is another region's response bucket: the stack answers through its own region's.
        "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/k",
    ] {
        let request: Request = serde_json::from_value(event("Create", FUNCTION_VERSION, url))
            .expect("the handler reads CloudFormation's event");
        let refused = handle(
            request,
            Some(FUNCTION_VERSION),
            Some("eu-west-1"),
            Instant::now() + Duration::from_secs(60),
            &triage::tls::https_client_builder().build().unwrap(),
            || db::migrate(&config.database),
        )
        .await;
        assert!(refused.is_err(), "{url}");
    }
    assert_eq!(table_count(&config).await, 0, "nothing migrated");
}
