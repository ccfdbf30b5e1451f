//! Every test gets a fresh database on one real PostgreSQL server: `DATABASE_URL` when set,
//! otherwise a throwaway one started once per run by `scripts/local-postgres` under `target/`.

use std::{path::PathBuf, process::Command, sync::OnceLock};

/// The server's admin URL, starting the throwaway server on first use.
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("DATABASE_URL") {
            return url;
        }
        local_postgres(
            "start",
            &repo_root().join("target/test-postgres"),
            None,
            &[],
        )
    })
}

/// Creates an empty database and returns its URL.
pub async fn fresh_database() -> String {
    database_on(server_url()).await
}

/// A PostgreSQL server of one test's own, for faults that would break every other test on
/// the shared one (a crash, a restart). Durable commits, so a crash loses only what was never
/// acknowledged. Stopped when dropped.
pub struct OwnServer {
    dir: PathBuf,
    url: String,
    /// The server's environment beyond the script's (a moved clock: [`OwnServer::start_under`]).
    env: Vec<(&'static str, String)>,
}

impl OwnServer {
    /// Starts (initialising on first use) the server kept in `target/<name>`.
    pub fn start(name: &str) -> Self {
        Self::start_under(name, &[])
    }

    /// The same, the server run with `env` added to its environment, now and at every restart
    /// (libfaketime's variables: the midnight test moves the server's clock). A server an
    /// earlier run left running is stopped first, so that it starts under `env`.
    pub fn start_under(name: &str, env: &[(&'static str, String)]) -> Self {
        let dir = repo_root().join("target").join(name);
        if !env.is_empty() {
            local_postgres("stop", &dir, None, &[]);
        }
        let url = local_postgres("start", &dir, Some(own_ports(name)), env);
        Self {
            dir,
            url,
            env: env.to_vec(),
        }
    }

    /// A new cluster in `target/<name>`, whatever an earlier run left there: for tests of
    /// what the cluster holds beside databases (roles).
    pub fn start_new(name: &str) -> Self {
        let dir = repo_root().join("target").join(name);
        local_postgres("wipe", &dir, None, &[]);
        Self::start(name)
    }

    /// The admin URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// An empty database on this server.
    pub async fn fresh_database(&self) -> String {
        database_on(&self.url).await
    }

    /// Kills the server at once (`pg_ctl stop -m immediate`): every connection is reset,
    /// as in a crash or an RDS failover.
    pub fn crash(&self) {
        local_postgres("stop", &self.dir, None, &[]);
    }

    /// Starts the server again after [`OwnServer::crash`], on the same port.
    pub fn restart(&self) {
        let name = self.dir.file_name().unwrap().to_string_lossy();
        let url = local_postgres("start", &self.dir, Some(own_ports(&name)), &self.env);
        assert_eq!(url, self.url, "the server came back on another port");
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        local_postgres("stop", &self.dir, None, &[]);
    }
}

/// psql of the server the tests run on (`scripts/local-postgres bindir`: the tested major's).
pub fn psql() -> PathBuf {
    static BINDIR: OnceLock<PathBuf> = OnceLock::new();
    BINDIR
        .get_or_init(|| PathBuf::from(local_postgres("bindir", &repo_root(), None, &[])))
        .join("psql")
}

/// Runs docs/sql/roles.sql on `url` as an operator does (psql, as the master login of `url`),
/// with `vars` (`psql -v NAME=VALUE`); panics with psql's error. One run at a time per test
/// process: roles belong to the cluster, and two runs creating the same group role at once
/// would collide (an operator runs one at a time).
pub fn roles_sql(url: &str, vars: &[(&str, &str)]) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut command = Command::new(psql());
    for (name, value) in vars {
        command.arg("-v").arg(format!("{name}={value}"));
    }
    let out = command
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-f"])
        .arg(repo_root().join("docs/sql/roles.sql"))
        .arg(url)
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "roles.sql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where a server of its own looks for a free port: a range of 32 apart from the shared
/// servers' (55432 and up) and, by its name, from the other own servers'. A crashed server
/// comes back on its port only if nobody took it meanwhile: two servers scanning one range
/// did take each other's ports while one was down (a test then reached the wrong server).
fn own_ports(name: &str) -> u16 {
    // FNV-1a: stable across runs and platforms, unlike std's hasher.
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    57_000 + (hash % 200) as u16 * 32
}

/// Runs `scripts/local-postgres CMD DIR` with `env` added and returns what it printed.
/// `own`: a server of its own (durable commits, a port scanned for from there), else the
/// shared one.
fn local_postgres(
    cmd: &str,
    dir: &std::path::Path,
    own: Option<u16>,
    env: &[(&'static str, String)],
) -> String {
    let mut script = Command::new("bash");
    script
        .arg(repo_root().join("scripts/local-postgres"))
        .arg(cmd)
        .envs(env.iter().map(|(k, v)| (k, v.as_str())));
    if cmd != "bindir" {
        script.arg(dir);
    }
    if let Some(port_base) = own {
        script
            .env("LOCAL_PG_DURABLE", "1")
            .env("PGPORT_BASE", port_base.to_string());
    }
    let out = script.output().expect("run scripts/local-postgres");
    assert!(
        out.status.success(),
        "local postgres {cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

async fn database_on(admin: &str) -> String {
    let name = format!("test_{}", uuid::Uuid::new_v4().simple());
    let (client, conn) = tokio_postgres::connect(admin, tokio_postgres::NoTls)
        .await
        .expect("connect to test server");
    tokio::spawn(conn);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let mut config: tokio_postgres::Config = admin.parse().unwrap();
    config.dbname(&name);
    to_url(&config, &name)
}

fn to_url(config: &tokio_postgres::Config, dbname: &str) -> String {
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(p) => p.to_string_lossy().into_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    // Keep the local server's explicit plain-TCP choice (scripts/local-postgres): without it
    // the application insists on verified TLS.
    let query = match config.get_ssl_mode() {
        tokio_postgres::config::SslMode::Disable => "?sslmode=disable",
        _ => "",
    };
    match config.get_password() {
        Some(pw) => format!(
            "postgres://{user}:{}@{host}:{port}/{dbname}{query}",
            String::from_utf8_lossy(pw)
        ),
        None => format!("postgres://{user}@{host}:{port}/{dbname}{query}"),
    }
}

#[cfg(test)]
mod tests {
    use super::own_ports;

    #[test]
    fn the_own_servers_of_the_suites_scan_ranges_of_their_own() {
        let names = [
            "outage-postgres-short",
            "outage-postgres-long",
            "reliability-postgres",
        ];
        let mut bases: Vec<u16> = names.iter().map(|n| own_ports(n)).collect();
        bases.sort();
        assert!(bases.windows(2).all(|w| w[1] - w[0] >= 32), "{bases:?}");
        assert!(
            bases[0] > 55_432 + 31,
            "apart from the shared servers' range"
        );
    }
}
