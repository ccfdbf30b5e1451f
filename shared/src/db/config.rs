//! Where the database is and how to log in: plain data, filled from the environment by
//! `crate::config` and, for the secret, by `crate::aws`.

use std::{sync::Arc, time::Duration};

use crate::{
    secret::{ExposeSecret, RotatingSecret, Secret},
    tls::CaRoots,
};

#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// `DATABASE_URL`: the local path (CLI, tests, `triage dev`).
    pub url: Secret,
    /// `TRIAGE_DB_SECRET_ARN` (+ `TRIAGE_DB_HOST`, `TRIAGE_DB_NAME`): the Lambda path. Takes
    /// precedence over `url`; `crate::aws::secrets::resolve` fetches it.
    pub secret: Option<DbSecretRef>,
    /// Filled from `secret` by `crate::aws::secrets::resolve`; shared by every clone, so a refresh after a
    /// rotation serves all pools of the process.
    pub credentials: Option<Arc<DbCredentials>>,
    /// `TRIAGE_DB_TLS`. Unset: `sslmode=disable` in `DATABASE_URL` means [`DbTls::Disable`]
    /// (for a loopback host only; another host is refused),
    /// anything else (libpq's `prefer` and `require` included) verify-full with the RDS CAs.
    pub tls: Option<DbTls>,
    pub pool_size: usize,
    pub connect_timeout: Duration,
    pub statement_timeout: Duration,
}

/// Where the database secret is, and what the environment adds to it: an RDS-managed master
/// secret holds only username and password, and an RDS Proxy endpoint replaces the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbSecretRef {
    pub arn: String,
    pub host: Option<String>,
    pub dbname: Option<String>,
}

/// Transport security to PostgreSQL. There is no opportunistic mode: TLS either is verified
/// or was explicitly turned off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbTls {
    /// Plain TCP, for a local server.
    Disable,
    /// TLS whose certificate chains to one of `roots` and names the host we connected to.
    VerifyFull { roots: CaRoots },
}

/// Everything needed to log in to PostgreSQL.
#[derive(Clone, Debug)]
pub struct DbLogin {
    pub user: String,
    pub password: Secret,
    pub host: String,
    pub port: u16,
    pub dbname: String,
}

impl PartialEq for DbLogin {
    fn eq(&self, other: &Self) -> bool {
        (&self.user, &self.host, self.port, &self.dbname)
            == (&other.user, &other.host, other.port, &other.dbname)
            && self.password.expose_secret() == other.password.expose_secret()
    }
}

/// The database login, from an RDS-shaped secret.
pub type DbCredentials = RotatingSecret<DbLogin>;
