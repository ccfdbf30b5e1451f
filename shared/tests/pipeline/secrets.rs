//! Lambda's path to the database and the provider: secrets read from Secrets Manager (moto
//! here), logins verified over TLS against the RDS-like test server, and a rotation picked up
//! by the next connection while old connections keep working.

use std::sync::Arc;

use axum::{body::Body, http::Request};
use serde_json::json;
use triage::{
    aws::secrets::{self, SecretsManager},
    config::Config,
    db,
    db::DbTls,
    secret::ExposeSecret,
};

use crate::{
    helpers::{spawn_app_with_fake, TestApp},
    tls_postgres::{server, uses_tls, PASSWORD},
};

/// A Secrets Manager client for moto, or `None` (after a loud message) without moto.
pub(crate) fn moto() -> Option<SecretsManager> {
    let env = testkit::moto::aws_env()?;
    let lookup = |name: &str| env.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
    Some(SecretsManager::from_lookup(lookup).expect("client for moto"))
}

pub(crate) async fn create_secret(sm: &SecretsManager, value: &str) -> String {
    let name = format!("triage/test/{}", uuid::Uuid::new_v4().simple());
    let out = sm
        .client()
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
        .expect("moto creates the secret");
    out.arn.unwrap()
}

pub(crate) async fn put_secret(sm: &SecretsManager, arn: &str, value: &str) {
    sm.client()
        .put_secret_value()
        .secret_id(arn)
        .secret_string(value)
        .send()
        .await
        .expect("moto stores the new version");
}

/// The Lambda configuration: secret ARNs (and overrides) from the environment, TLS verified
/// against the test server's CA, secrets fetched from moto.
async fn load(sm: &SecretsManager, env: &[(&str, &str)]) -> Config {
    let mut config = Config::from_lookup(|name| {
        env.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    config.database.tls = Some(DbTls::VerifyFull {
        roots: server().ca.clone(),
    });
    secrets::resolve_with(&mut config, sm)
        .await
        .expect("secrets resolve");
    config
}

#[tokio::test]
async fn database_login_comes_from_the_rds_shaped_secret_with_port_as_number_or_string() {
    let Some(sm) = moto() else {
        return;
    };
    let server = server();
    for port in [json!(server.port), json!(server.port.to_string())] {
        let dbname = server.fresh_database().await;
        let secret = json!({"engine": "postgres", "username": "triage_admin", "password": PASSWORD,
                            "host": "localhost", "port": port, "dbname": dbname});
        let arn = create_secret(&sm, &secret.to_string()).await;
        let config = load(&sm, &[("TRIAGE_DB_SECRET_ARN", &arn)]).await;
        assert!(
            db::migrate(&config.database).await.unwrap() > 0,
            "port {port}"
        );
        let client = db::pool(&config.database).unwrap().get().await.unwrap();
        assert!(uses_tls(&client).await);
    }
}

#[tokio::test]
async fn host_and_dbname_from_the_environment_override_the_secret() {
    let Some(sm) = moto() else {
        return;
    };
    let server = server();
    let dbname = server.fresh_database().await;
    // The secret names another host (an RDS Proxy endpoint goes in front of it this way).
    let secret = json!({"username": "triage_admin", "password": PASSWORD, "host": "db.invalid",
                        "port": server.port, "dbname": "elsewhere"});
    let arn = create_secret(&sm, &secret.to_string()).await;
    let config = load(
        &sm,
        &[
            ("TRIAGE_DB_SECRET_ARN", &arn),
            ("TRIAGE_DB_HOST", "localhost"),
            ("TRIAGE_DB_NAME", &dbname),
        ],
    )
    .await;
    let client = db::pool(&config.database).unwrap().get().await.unwrap();
    let current: String = client
        .query_one("SELECT current_database()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(current, dbname);
}

#[tokio::test]
async fn an_rds_master_secret_is_completed_by_the_environment() {
    let Some(sm) = moto() else {
        return;
    };
    // What RDS stores for `--manage-master-user-password`: username and password only.
    let arn = create_secret(&sm, r#"{"username": "triage_admin", "password": "pw"}"#).await;
    let env = [
        ("TRIAGE_DB_SECRET_ARN", arn.as_str()),
        ("TRIAGE_DB_HOST", "triage.abc.eu-west-1.rds.amazonaws.com"),
        ("TRIAGE_DB_NAME", "triage"),
    ];
    let config = load(&sm, &env).await;
    let login = config.database.credentials.as_ref().unwrap().current().1;
    assert_eq!(
        (
            login.user.as_str(),
            login.host.as_str(),
            login.port,
            login.dbname.as_str()
        ),
        ("triage_admin", env[1].1, 5432, "triage")
    );
    let mut config =
        Config::from_lookup(|name| (name == "TRIAGE_DB_SECRET_ARN").then(|| arn.clone())).unwrap();
    let err = secrets::resolve_with(&mut config, &sm).await.unwrap_err();
    assert!(err.to_string().contains("TRIAGE_DB_HOST"), "{err}");
}

#[tokio::test]
async fn provider_key_comes_from_its_secret_plain_or_json() {
    let Some(sm) = moto() else {
        return;
    };
    for stored in ["sk-from-secret", r#"{"api_key": "sk-from-secret"}"#] {
        let arn = create_secret(&sm, stored).await;
        let config = load(&sm, &[("TRIAGE_PROVIDER_SECRET_ARN", &arn)]).await;
        assert_eq!(
            config.provider.api_key.current().1.expose_secret(),
            "sk-from-secret"
        );
        assert!(!format!("{config:?}").contains("sk-from-secret"));
    }
}

/// A login role of its own on the TLS server, its secret in moto, and the configuration
/// loaded from that secret: what a container holds before a rotation.
struct Rotation {
    sm: SecretsManager,
    role: String,
    arn: String,
    config: Config,
}

impl Rotation {
    async fn start(sm: SecretsManager) -> Self {
        let role = server().fresh_role("first-password").await;
        let arn = create_secret(&sm, &Self::secret(&role, "first-password")).await;
        let config = load(&sm, &[("TRIAGE_DB_SECRET_ARN", &arn)]).await;
        Self {
            sm,
            role,
            arn,
            config,
        }
    }

    fn secret(role: &str, password: &str) -> String {
        json!({"username": role, "password": password, "host": "localhost",
               "port": server().port, "dbname": "postgres"})
        .to_string()
    }

    /// Rotation's `setSecret` step: the database gets the new password.
    async fn change_database_password(&self) {
        server()
            .admin(&format!(
                "ALTER ROLE {} PASSWORD 'second-password'",
                self.role
            ))
            .await;
    }

    /// Rotation's `finishSecret` step: the secret's current version has it too.
    async fn change_secret(&self) {
        put_secret(
            &self.sm,
            &self.arn,
            &Self::secret(&self.role, "second-password"),
        )
        .await;
    }
}

#[tokio::test]
async fn a_rotated_password_is_picked_up_by_the_next_connection() {
    let Some(sm) = moto() else {
        return;
    };
    let mut rotation = Rotation::start(sm).await;
    rotation.config.database.pool_size = 2;
    let pool = db::pool(&rotation.config.database).unwrap();
    let before = pool.get().await.unwrap();

    rotation.change_database_password().await;
    rotation.change_secret().await;

    // A new connection (the first one is still held) is refused with the cached password,
    // re-reads the secret once, and succeeds; the old session is unaffected.
    let after = pool.get().await.expect("new connection after the rotation");
    let user: String = after
        .query_one("SELECT current_user", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(user, rotation.role);
    before.query_one("SELECT 1", &[]).await.unwrap();
    let credentials = rotation.config.database.credentials.as_ref().unwrap();
    assert_eq!(
        credentials.current().1.password.expose_secret(),
        "second-password"
    );
}

#[tokio::test]
async fn while_the_secret_lags_the_password_the_api_answers_503() {
    let Some(sm) = moto() else {
        return;
    };
    let rotation = Rotation::start(sm).await;
    rotation.change_database_password().await;
    let app = TestApp {
        pool: db::pool(&rotation.config.database).unwrap(),
        config: Arc::new(rotation.config),
    };
    let response = app
        .request(
            Request::get(format!("/tickets/{}", uuid::Uuid::new_v4()))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(response.status, 503, "{:?}", response.body);
}

#[tokio::test]
async fn a_rotated_provider_key_pauses_claiming_once_and_the_probe_calls_with_the_new_key() {
    let Some(sm) = moto() else {
        return;
    };
    let arn = create_secret(&sm, "sk-before-rotation").await;
    let mut container = Config::local("postgres://unused");
    container.provider.api_key_secret_arn = Some(arn.clone());
    secrets::resolve_with(&mut container, &sm)
        .await
        .expect("the provider secret resolves");
    let api_key = container.provider.api_key.clone();

    let fake = fake_provider::FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, move |config| config.provider.api_key = api_key).await;
    for n in 0..3 {
        app.post_ticket("Login", &format!("ticket {n}")).await;
    }

    // The rotation: the provider now accepts only the new key, and the secret holds it.
    put_secret(&sm, &arn, "sk-after-rotation").await;
    fake.accept_only_key("sk-after-rotation");

    let worker = app.worker();
    let first = app.run_worker_once(&worker).await;
    assert!(first.paused, "a refused key pauses claiming: {first:?}");

    app.drain(&worker, std::time::Duration::from_secs(10)).await;

    // Calls that started before the re-read carried the old key and were refused; every call
    // after it (the breaker's probe first) carried the new key and was answered.
    let calls = fake.calls();
    let key = |c: &fake_provider::CallRecord| c.header("authorization").map(str::to_owned);
    let old = Some("Bearer sk-before-rotation".to_owned());
    let new = Some("Bearer sk-after-rotation".to_owned());
    assert!(
        calls.iter().any(|c| key(c) == old),
        "the old key was used first"
    );
    let first_new = calls
        .iter()
        .position(|c| key(c) == new)
        .expect("the new key was used");
    assert!(calls[..first_new]
        .iter()
        .all(|c| c.status == 401 && key(c) == old));
    assert!(calls[first_new..]
        .iter()
        .all(|c| c.status == 200 && key(c) == new));
    assert_eq!(fake.billed_calls().len(), 3, "one billed call per ticket");
    let (done, attempts) = (
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'done'")
            .await,
        app.count("SELECT max(attempts)::bigint FROM evaluation_outbox")
            .await,
    );
    // The claims that met the refused key gave their attempt back.
    assert_eq!(
        (done, attempts),
        (3, 1),
        "an attempt was spent on the refused key"
    );
}
