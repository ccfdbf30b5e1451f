use std::{sync::Arc, time::Duration};

use triage::{config::Config, db, secret::ExposeSecret};

use crate::helpers::{fresh_database, spawn_app, spawn_app_with, TestApp};

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

/// The password of every login these tests make (the test server checks passwords, as RDS).
const PASSWORD: &str = "triage-test-login";

/// `url` with another user, logging in with [`PASSWORD`].
fn as_user(url: &str, user: &str) -> String {
    as_login(url, user, PASSWORD)
}

/// Runs docs/sql/roles.sql as the operator would, as the database's owner.
fn run_roles_sql(url: &str, role: &str) {
    run_roles_sql_with(url, role, None)
}

/// roles.sql, also creating the API's login `api_login` when given.
fn run_roles_sql_with(url: &str, role: &str, api_login: Option<&str>) {
    let mut vars = vec![("app_role", role), ("app_password", PASSWORD)];
    if let Some(login) = api_login {
        vars.extend([("api_login", login), ("api_password", PASSWORD)]);
    }
    testkit::roles_sql(url, &vars);
}

/// The ingest → worker → sweeper path, as `url`'s user.
async fn run_the_pipeline_as(url: &str) {
    let config = Config::local(url);
    db::migrate(&config.database).await.expect("migrates");
    let app = TestApp {
        pool: db::pool(&config.database).unwrap(),
        config: Arc::new(config),
    };
    assert_eq!(app.post_ticket("Charged twice", "refund").await.status, 201);
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!(report.evaluated, 1);
    let swept = triage::pipeline::sweep::sweep(&app.pool, &app.config)
        .await
        .unwrap();
    assert_eq!((swept.health.done, swept.health.pending), (1, 0));
}

fn role_name() -> String {
    format!(
        "triage_app_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

#[tokio::test]
async fn the_application_role_of_roles_sql_migrates_and_runs_the_pipeline() {
    let url = fresh_database().await;
    let role = role_name();
    // A bare login cannot: since PostgreSQL 15 only the owner creates tables in `public`.
    let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'"))
        .await
        .unwrap();
    let version: i32 = admin
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .unwrap()
        .get(0);
    if version >= 150000 {
        let bare = db::migrate(&Config::local(&as_user(&url, &role)).database).await;
        assert!(
            bare.as_ref()
                .is_err_and(|e| format!("{e:?}").contains("permission denied for schema public")),
            "{bare:?}"
        );
    }

    run_roles_sql(&url, &role);
    run_the_pipeline_as(&as_user(&url, &role)).await;
    let super_user: bool = admin
        .query_one(
            "SELECT rolsuper OR rolcreatedb OR rolcreaterole FROM pg_roles WHERE rolname = $1",
            &[&role],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!super_user, "the role can log in and nothing more");
}

#[tokio::test]
async fn roles_sql_hands_tables_made_by_the_master_user_to_the_application_role() {
    // A first deploy ran with the RDS master secret: the owner made the tables.
    let url = fresh_database().await;
    db::migrate(&Config::local(&url).database).await.unwrap();
    let role = role_name();
    run_roles_sql(&url, &role);
    let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let foreign: Vec<(String, String)> = admin
        .query(
            "SELECT tablename::text, tableowner::text FROM pg_tables
             WHERE schemaname = 'public' AND tableowner <> $1",
            &[&role],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(
        foreign,
        [("operation_audit".to_string(), "triage_audit".to_string())],
        "every table but the audit trail now belongs to {role}"
    );
    run_the_pipeline_as(&as_user(&url, &role)).await;
    // A later migration can change what it owns.
    let (client, conn) = tokio_postgres::connect(&as_user(&url, &role), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute("ALTER TABLE evaluation_outbox ADD COLUMN later_migration int")
        .await
        .unwrap();
    // Running it again changes nothing and fails on nothing.
    run_roles_sql(&url, &role);
}

/// What the API does, as `api`'s login: a keyed ticket, its replay, and the read.
async fn ingest_and_read_as_the_api(api: &TestApp) {
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
    // The desk's feedback, given twice: the second supersedes the first (V25's grants).
    for department in ["billing", "technical"] {
        let feedback = axum::http::Request::post(format!("/tickets/{id}/feedback"))
            .header("content-type", "application/json")
            .body(axum::body::Body::from(
                serde_json::json!({"department": department, "is_urgent": false}).to_string(),
            ))
            .unwrap();
        let given = api.request(feedback).await;
        assert_eq!(given.status, 200, "{:?}", given.body);
    }
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
    ingest_and_read_as_the_api(&api).await;

    let client = api.pool.get().await.unwrap();
    crate::helpers::assert_refused(
        &client,
        &[
            "DELETE FROM ticket",
            "UPDATE evaluation_outbox SET status = 'done'",
            "DELETE FROM evaluation_result",
            "TRUNCATE provider_call",
            "ALTER TABLE ticket ADD COLUMN x int",
        ],
    )
    .await;
    drop(client);
    api.pool.close();
    admin
        .batch_execute(&format!("DROP ROLE {login}"))
        .await
        .unwrap();
}

#[tokio::test]
async fn on_the_documented_path_the_api_runs_as_its_own_login_which_may_not_delete_or_change_the_schema(
) {
    // roles.sql before the first deploy, the stack's migrations as the application role, then
    // roles.sql again (an operator re-running it): the API's login works and can do no harm.
    let url = fresh_database().await;
    let role = role_name();
    let login = format!("api_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    run_roles_sql_with(&url, &role, Some(&login));
    db::migrate(&Config::local(&as_user(&url, &role)).database)
        .await
        .expect("the application role migrates");
    run_roles_sql_with(&url, &role, Some(&login));

    let mut config = Config::local(&as_user(&url, &login));
    config.limits.caller_daily_tickets = Some(10);
    let api = TestApp {
        pool: db::pool(&config.database).unwrap(),
        config: Arc::new(config),
    };
    ingest_and_read_as_the_api(&api).await;
    assert_eq!(api.post_ticket("c", "d").await.status, 201);

    let client = api.pool.get().await.unwrap();
    crate::helpers::assert_refused(
        &client,
        &[
            "DELETE FROM ticket",
            "DELETE FROM request_idempotency",
            "UPDATE ticket SET owner = 'someone-else'",
            "DELETE FROM operation_audit",
            "TRUNCATE evaluation_outbox",
            "ALTER TABLE ticket ADD COLUMN x int",
            "DROP TABLE ticket",
            "CREATE TABLE intruder (x int)",
            "CREATE FUNCTION intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        ],
    )
    .await;
    drop(client);
    api.pool.close();
    let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("DROP ROLE {login}"))
        .await
        .unwrap();
}
