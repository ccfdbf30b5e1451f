use triage::{db, secret::ExposeSecret};

use crate::helpers::{fresh_database, spawn_app};

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

/// `url` logged in as `user` with `password` instead of its own login.
fn as_login(url: &str, user: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (_, host_and_rest) = rest.split_once('@').unwrap();
    format!("{scheme}://{user}:{password}@{host_and_rest}")
}

#[tokio::test]
async fn a_login_in_the_migrated_api_role_can_ingest_and_read_but_not_delete_or_rewrite_jobs() {
    let app = spawn_app().await;
    let login = format!("api_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let admin = app.pool.get().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {login} LOGIN PASSWORD 'api-test-password' IN ROLE triage_api"
        ))
        .await
        .unwrap();

    let url = as_login(
        app.config.database.url.expose_secret(),
        &login,
        "api-test-password",
    );
    let api = crate::helpers::TestApp {
        pool: db::pool(&triage::config::Config::local(&url).database).unwrap(),
        config: app.config.clone(),
    };
    let created = api
        .post_json(r#"{"subject":"a","message":"b"}"#.into(), Some("k1"))
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let replay = api
        .post_json(r#"{"subject":"a","message":"b"}"#.into(), Some("k1"))
        .await;
    assert_eq!(replay.body["id"], created.body["id"]);
    let id = created.body["id"].as_str().unwrap();
    assert_eq!(api.get_ticket(id).await.status, 200);

    let client = api.pool.get().await.unwrap();
    for forbidden in [
        "DELETE FROM ticket",
        "UPDATE evaluation_outbox SET status = 'done'",
        "DELETE FROM evaluation_result",
        "TRUNCATE provider_call",
        "ALTER TABLE ticket ADD COLUMN x int",
    ] {
        let refused = client.batch_execute(forbidden).await.unwrap_err();
        assert_eq!(
            refused.code(),
            Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
            "{forbidden}: {refused}"
        );
    }
    drop(client);
    api.pool.close();
    admin
        .batch_execute(&format!("DROP ROLE {login}"))
        .await
        .unwrap();
}
