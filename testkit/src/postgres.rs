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
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = root.join("target/test-postgres");
        let out = Command::new("bash")
            .arg(root.join("scripts/local-postgres"))
            .arg("start")
            .arg(&dir)
            .output()
            .expect("run scripts/local-postgres");
        assert!(
            out.status.success(),
            "local postgres: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
}

/// Creates an empty database and returns its URL.
pub async fn fresh_database() -> String {
    let admin = server_url();
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
