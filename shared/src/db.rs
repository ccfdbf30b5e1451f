//! Connections fit for Lambda: one pool per process, built at init without connecting
//! (so cold start stays cheap), connections opened on first use, reused across invocations,
//! and replaced when the server dropped them. Connect and statement timeouts are bounded so a
//! database outage turns into a fast `Unavailable`, never a hang.

use std::{str::FromStr, time::Duration};

use deadpool_postgres::{
    Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts,
};
use tokio_postgres::NoTls;

use crate::{
    config::DatabaseConfig,
    error::{ConfigError, Error, Result},
};

pub type Client = deadpool_postgres::Object;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// Any migration lock id works as long as every deploy uses the same one.
const MIGRATION_LOCK_ID: i64 = 0x7472_6961_6765; // "triage"

pub fn pg_config(config: &DatabaseConfig) -> Result<tokio_postgres::Config> {
    if config.url.is_empty() {
        return Err(ConfigError::invalid("DATABASE_URL", "is not set".into()).into());
    }
    let mut pg = tokio_postgres::Config::from_str(config.url.expose())
        .map_err(|e| ConfigError::invalid("DATABASE_URL", e.to_string()))?;
    pg.connect_timeout(config.connect_timeout);
    pg.application_name("triage");
    // Dead peers (a failed-over RDS instance) are noticed instead of waited on forever.
    pg.keepalives_idle(Duration::from_secs(30));
    Ok(pg)
}

/// Bounds every statement of a pooled session. Set after connecting rather than as a startup
/// `options` parameter, which RDS Proxy rejects; migrations use their own session without it.
fn session_settings(config: &DatabaseConfig) -> String {
    let ms = config.statement_timeout.as_millis();
    format!("SET statement_timeout = {ms}; SET lock_timeout = {ms}")
}

pub fn pool(config: &DatabaseConfig) -> Result<Pool> {
    let manager = Manager::from_config(
        pg_config(config)?,
        NoTls,
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
                client
                    .batch_execute(&settings)
                    .await
                    .map_err(HookError::Backend)
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
    let (mut client, connection) = pg_config(config)?
        .connect(NoTls)
        .await
        .map_err(|e| Error::Unavailable(e.to_string()))?;
    let connection = tokio::spawn(connection);
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
