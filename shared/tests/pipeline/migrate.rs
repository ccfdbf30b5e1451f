use std::time::Duration;

use triage::db;

use crate::helpers::{fresh_database, spawn_app, spawn_app_with};

#[tokio::test]
async fn migrating_twice_is_a_no_op() {
    let app = spawn_app().await;
    assert_eq!(db::migrate(&app.config.database).await.unwrap(), 0);
}

#[tokio::test]
async fn concurrent_migrations_apply_each_migration_once() {
    let url = fresh_database().await;
    let config = triage::config::Config::local(&url);
    let runs = futures::future::join_all((0..4).map(|_| db::migrate(&config.database))).await;
    let applied: usize = runs
        .into_iter()
        .map(|r| r.expect("every concurrent run succeeds"))
        .sum();
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let versions: i64 = client
        .query_one("SELECT count(*) FROM refinery_schema_history", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        applied as i64, versions,
        "exactly one run applied each migration"
    );
}

#[tokio::test]
async fn pooled_sessions_carry_the_statement_timeout() {
    let app = spawn_app().await;
    let client = app.pool.get().await.unwrap();
    let timeout: String = client
        .query_one("SHOW statement_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(timeout, "10s");
}

#[tokio::test]
async fn a_zero_statement_timeout_sends_no_set_and_leaves_the_timeouts_to_the_database() {
    let app = spawn_app_with(|c| c.database.statement_timeout = Duration::ZERO).await;
    let admin = app.pool.get().await.unwrap();
    let database: String = admin
        .query_one("SELECT current_database()", &[])
        .await
        .unwrap()
        .get(0);
    admin
        .batch_execute(&format!(
            "ALTER DATABASE \"{database}\" SET statement_timeout = '7s'"
        ))
        .await
        .unwrap();
    // A new session, as a container's pool opens it after the setting (or behind RDS Proxy).
    let pool = db::pool(&app.config.database).unwrap();
    let client = pool.get().await.unwrap();
    let timeout: String = client
        .query_one("SHOW statement_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(timeout, "7s", "the database's own setting, no SET over it");
}

#[tokio::test]
async fn an_older_build_migrating_a_newer_schema_succeeds() {
    let app = spawn_app().await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
             SELECT 9999, 'from_a_newer_release', applied_on, checksum FROM refinery_schema_history WHERE version = 1",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        db::migrate(&app.config.database).await.unwrap(),
        0,
        "a rollback deploy is not blocked"
    );
}
