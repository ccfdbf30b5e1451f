//! Connections fit for Lambda: one pool per process, built at init without connecting
//! (so cold start stays cheap), connections opened on first use, reused across invocations,
//! and replaced when the server dropped them. Connect and statement timeouts are bounded so a
//! database outage turns into a fast `Unavailable`, never a hang.
//!
//! Every connection is opened by [`Connector`]: TLS verified against the embedded RDS CAs
//! unless explicitly disabled, and the login from `DATABASE_URL` or from Secrets Manager,
//! re-read once when the server refuses it (a rotation happened since it was cached).
//! Owns the pool, migrations and the login settings; uses tls, secret and the domain.

use std::{future::Future, str::FromStr, sync::Arc, time::Duration};

use deadpool_postgres::{
    Connect, Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts,
};
use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio_postgres::{config::SslMode, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

mod config;

pub use config::{DatabaseConfig, DbCredentials, DbLogin, DbSecretRef, DbTls};

use crate::{
    domain::error::{ConfigError, Error, Result},
    secret::ExposeSecret,
    tls::{self, CaRoots},
};

pub type Client = deadpool_postgres::Object;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// The advisory lock migrations hold: any id works as long as every deploy uses the same one.
pub const MIGRATION_LOCK_ID: i64 = 0x7472_6961_6765; // "triage"

/// Opens connections as `DatabaseConfig` says; the pool and migrations share it.
struct Connector {
    login: Login,
    tls: Option<MakeRustlsConnect>,
    connect_timeout: Duration,
}

enum Login {
    Url(Box<tokio_postgres::Config>),
    Secret(Arc<DbCredentials>),
}

impl Connector {
    fn new(config: &DatabaseConfig) -> Result<Self> {
        let mut url_disables_tls = false;
        let login = match (&config.secret, &config.credentials) {
            (Some(_), Some(credentials)) => Login::Secret(credentials.clone()),
            (Some(_), None) => {
                return Err(ConfigError::invalid(
                    "TRIAGE_DB_SECRET_ARN",
                    "was not fetched: resolve the configuration's secrets first (triage::aws::secrets::resolve)".into(),
                )
                .into())
            }
            (None, _) if config.url.expose_secret().is_empty() => {
                return Err(ConfigError::invalid("DATABASE_URL", "is not set".into()).into())
            }
            (None, _) => {
                let pg = tokio_postgres::Config::from_str(config.url.expose_secret())
                    .map_err(|e| ConfigError::invalid("DATABASE_URL", e.to_string()))?;
                // The local path's explicit opt-out, for a server on this machine only; any
                // other sslmode is upgraded below.
                url_disables_tls = pg.get_ssl_mode() == SslMode::Disable;
                if url_disables_tls && config.tls.is_none() && !all_hosts_local(&pg) {
                    return Err(ConfigError::invalid(
                        "DATABASE_URL",
                        "sslmode=disable is accepted for a loopback host only (a password \
                         and ticket text would cross the network in clear); remove it, or set \
                         TRIAGE_DB_TLS=disable to turn TLS off deliberately"
                            .into(),
                    )
                    .into());
                }
                Login::Url(Box::new(pg))
            }
        };
        let tls = match &config.tls {
            Some(DbTls::Disable) => None,
            None if url_disables_tls => None,
            Some(DbTls::VerifyFull { roots }) => Some(tls_connector(roots)?),
            None => Some(tls_connector(&CaRoots::RDS)?),
        };
        Ok(Self {
            login,
            tls,
            connect_timeout: config.connect_timeout,
        })
    }

    async fn connect(
        &self,
    ) -> Result<(tokio_postgres::Client, JoinHandle<()>), tokio_postgres::Error> {
        let credentials = match &self.login {
            Login::Url(pg) => return self.open(pg.as_ref().clone()).await,
            Login::Secret(credentials) => credentials,
        };
        let (generation, login) = credentials.current();
        match self.open(login_config(&login)).await {
            Err(err) if is_login_refused(&err) && credentials.refresh(generation).await => {
                self.open(login_config(&credentials.current().1)).await
            }
            result => result,
        }
    }

    async fn open(
        &self,
        mut pg: tokio_postgres::Config,
    ) -> Result<(tokio_postgres::Client, JoinHandle<()>), tokio_postgres::Error> {
        pg.connect_timeout(self.connect_timeout);
        pg.application_name("triage");
        // Dead peers (a failed-over RDS instance) are noticed instead of waited on forever.
        pg.keepalives_idle(Duration::from_secs(30));
        match &self.tls {
            None => {
                pg.ssl_mode(SslMode::Disable);
                let (client, connection) = pg.connect(NoTls).await?;
                Ok((client, drive(connection)))
            }
            Some(tls) => {
                // `Require` plus a verifying connector is libpq's verify-full: the chain must
                // reach one of our roots and the certificate must name the host.
                pg.ssl_mode(SslMode::Require);
                let (client, connection) = pg.connect(tls.clone()).await?;
                Ok((client, drive(connection)))
            }
        }
    }
}

/// Whether every host of `pg` is this machine: a loopback name or address, or a Unix socket.
fn all_hosts_local(pg: &tokio_postgres::Config) -> bool {
    use tokio_postgres::config::Host;
    let addresses_local = pg.get_hostaddrs().iter().all(|ip| ip.is_loopback());
    let hosts_local = pg.get_hosts().iter().all(|host| match host {
        Host::Tcp(name) => {
            name.eq_ignore_ascii_case("localhost")
                || name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        #[cfg(unix)]
        Host::Unix(_) => true,
    });
    addresses_local && hosts_local
}

impl Connect for Connector {
    fn connect(
        &self,
        _: &tokio_postgres::Config,
    ) -> BoxFuture<'_, Result<(tokio_postgres::Client, JoinHandle<()>), tokio_postgres::Error>>
    {
        Box::pin(Connector::connect(self))
    }
}

fn login_config(login: &DbLogin) -> tokio_postgres::Config {
    let mut pg = tokio_postgres::Config::new();
    pg.user(&login.user)
        .password(login.password.expose_secret())
        .host(&login.host)
        .port(login.port)
        .dbname(&login.dbname);
    pg
}

/// SQLSTATE class 28 (invalid authorization): wrong password, or no such role.
fn is_login_refused(err: &tokio_postgres::Error) -> bool {
    err.as_db_error()
        .is_some_and(|db| db.code().code().starts_with("28"))
}

/// The connection task: it runs until the client is dropped or the server goes away.
fn drive(
    connection: impl Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "database connection ended");
        }
    })
}

/// Trusts exactly `roots` (no system store: the database is RDS, or a test's own CA).
fn tls_connector(roots: &CaRoots) -> Result<MakeRustlsConnect, ConfigError> {
    let config =
        tls::database_config(roots).map_err(|e| ConfigError::invalid("TRIAGE_DB_TLS", e))?;
    Ok(MakeRustlsConnect::new(config))
}

/// Bounds every statement of a pooled session, and plans each execution of its prepared
/// statements for the tables as they are: a generic plan made while they were analyzed empty (a
/// fresh deploy, autovacuum on tiny tables) scans the results table and the day's ledger
/// partition, and grows with them (docs/database.md). Set after connecting rather than as a
/// startup `options` parameter, which RDS Proxy rejects; migrations use their own session
/// without it. A zero timeout sends nothing: the role or RDS Proxy's init query sets all three,
/// and a session without `SET` is not pinned by the proxy (docs/deploy.md).
fn session_settings(config: &DatabaseConfig) -> Option<String> {
    let ms = config.statement_timeout.as_millis();
    (ms > 0).then(|| {
        format!(
            "SET statement_timeout = {ms}; SET lock_timeout = {ms}; \
             SET plan_cache_mode = force_custom_plan"
        )
    })
}

pub fn pool(config: &DatabaseConfig) -> Result<Pool> {
    let manager = Manager::from_connect(
        // Unused: the Connector decides where each connection goes.
        tokio_postgres::Config::new(),
        Connector::new(config)?,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let wait = config.connect_timeout;
    let settings = session_settings(config);
    Pool::builder(manager)
        .max_size(config.pool_size)
        .runtime(Runtime::Tokio1)
        .post_create(Hook::async_fn(move |client, _| {
            let settings = settings.clone();
            Box::pin(async move {
                match settings {
                    Some(settings) => client
                        .batch_execute(&settings)
                        .await
                        .map_err(HookError::Backend),
                    None => Ok(()),
                }
            })
        }))
        .timeouts(Timeouts {
            wait: Some(wait),
            create: Some(wait),
            recycle: Some(wait),
        })
        .build()
        .map_err(|e| ConfigError::invalid("DATABASE_URL", e.to_string()).into())
}

pub async fn client(pool: &Pool) -> Result<Client> {
    Ok(pool.get().await?)
}

/// Applies `migrations/`. Safe when several deploys run it at once: a session advisory lock
/// serialises them, and refinery skips what is already applied, so the second run is a no-op.
/// Migrations newer than this build (a rollback to an older release) are left alone.
pub async fn migrate(config: &DatabaseConfig) -> Result<usize> {
    let (mut client, connection) = Connector::new(config)?
        .connect()
        .await
        .map_err(|e| Error::unavailable("database", e))?;
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_ID])
        .await?;
    let report = embedded::migrations::runner()
        .set_abort_missing(false)
        .run_async(&mut client)
        .await;
    // Unlock even when a migration failed; closing the session would release it as well.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_ID])
        .await;
    drop(client);
    let _ = connection.await;
    let applied = report?.applied_migrations().len();
    unlocked?;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn every_certificate_of_the_embedded_rds_bundle_parses() {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let pem = std::str::from_utf8(&CaRoots::RDS.0).unwrap();
        let blocks = pem.matches("-----BEGIN CERTIFICATE-----").count();
        assert!(
            blocks > 50,
            "{blocks} certificates: RDS has one CA per region"
        );
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&CaRoots::RDS.0) {
            // Parsed as X.509 and accepted as a trust anchor, or the test names the failure.
            roots
                .add(cert.expect("PEM decodes"))
                .expect("certificate parses");
        }
        assert_eq!(roots.len(), blocks);
        tls_connector(&CaRoots::RDS).unwrap();
    }

    fn tls_of(url: &str, setting: Option<&str>) -> bool {
        let config = Config::from_lookup(|name| match name {
            "DATABASE_URL" => Some(url.to_string()),
            "TRIAGE_DB_TLS" => setting.map(Into::into),
            _ => None,
        })
        .unwrap();
        Connector::new(&config.database).unwrap().tls.is_some()
    }

    #[test]
    fn plain_tcp_only_when_explicitly_configured() {
        let local = "postgres://triage@127.0.0.1:5432/triage";
        assert!(
            tls_of(local, None),
            "no sslmode: verify-full, even on loopback"
        );
        assert!(tls_of(&format!("{local}?sslmode=prefer"), None));
        assert!(tls_of(&format!("{local}?sslmode=require"), None));
        assert!(!tls_of(&format!("{local}?sslmode=disable"), None));
        assert!(!tls_of(local, Some("disable")));
        assert!(tls_of(
            &format!("{local}?sslmode=disable"),
            Some("verify-full")
        ));
        assert!(!tls_of(
            "postgres://triage@localhost/triage?sslmode=disable",
            None
        ));
        assert!(!tls_of(
            "postgres://triage@[::1]:5432/triage?sslmode=disable",
            None
        ));
        let err = Config::from_lookup(|n| (n == "TRIAGE_DB_TLS").then(|| "require".into()));
        assert!(err.unwrap_err().to_string().contains("TRIAGE_DB_TLS"));
    }

    #[test]
    fn sslmode_disable_in_the_url_is_refused_for_a_host_beyond_loopback() {
        for url in [
            "postgres://triage@db.example.internal:5432/triage?sslmode=disable",
            "postgres://triage@10.0.1.25/triage?sslmode=disable",
            "postgres://triage@localhost,db.example.internal/triage?sslmode=disable",
            "postgres://triage@localhost/triage?sslmode=disable&hostaddr=10.0.1.25",
        ] {
            let config =
                Config::from_lookup(|n| (n == "DATABASE_URL").then(|| url.into())).unwrap();
            let refused = Connector::new(&config.database)
                .err()
                .unwrap_or_else(|| panic!("{url}"));
            assert!(
                refused.to_string().contains("loopback host only"),
                "{url}: {refused}"
            );
        }
        // Turning TLS off elsewhere stays possible, but only said in so many words.
        assert!(!tls_of(
            "postgres://triage@10.0.1.25/triage?sslmode=disable",
            Some("disable")
        ));
    }

    #[test]
    fn a_secret_arn_must_be_fetched_before_connecting() {
        let config = Config::from_lookup(|n| {
            (n == "TRIAGE_DB_SECRET_ARN").then(|| "arn:aws:secretsmanager:x".into())
        })
        .unwrap();
        let err = pool(&config.database).unwrap_err();
        assert!(err.to_string().contains("secrets::resolve"), "{err}");
    }
}
