//! Connections fit for Lambda: one pool per process, built at init without connecting
//! (so cold start stays cheap), connections opened on first use, reused across invocations,
//! and replaced when the server dropped them. Connect and statement timeouts are bounded so a
//! database outage turns into a fast `Unavailable`, never a hang.

use std::{str::FromStr, time::Duration};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts};
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
    pg.options(format!(
        "-c statement_timeout={} -c lock_timeout={}",
        config.statement_timeout.as_millis(),
        config.statement_timeout.as_millis()
    ));
    // Dead peers (a failed-over RDS instance) are noticed instead of waited on forever.
    pg.keepalives_idle(Duration::from_secs(30));
    Ok(pg)
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
    Pool::builder(manager)
        .max_size(config.pool_size)
        .runtime(Runtime::Tokio1)
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
pub async fn migrate(config: &DatabaseConfig) -> Result<usize> {
    let (mut client, connection) = pg_config(config)?
        .connect(NoTls)
        .await
        .map_err(|e| Error::Unavailable(e.to_string()))?;
    let connection = tokio::spawn(connection);
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_ID])
        .await?;
    let report = embedded::migrations::runner().run_async(&mut client).await;
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
