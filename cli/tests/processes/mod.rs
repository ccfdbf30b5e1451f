//! `triage` processes for the tests that run the real binary (reliability, upgrade): the
//! environment a deployment's processes share, and a process whose stderr goes to a log file
//! under `target/<suite>/`, killed when dropped.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::Stdio,
};

use tokio::process::{Child, Command};

/// `target/<suite>/`, where the processes' logs go.
pub fn log_dir(suite: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target")
        .join(suite);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What every process of a test deployment shares: the database, the fake provider, and
/// retries fast enough for a test.
pub fn environment(database_url: &str, provider_url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", database_url.into()),
        ("TRIAGE_PROVIDER", "openai".into()),
        ("TRIAGE_PROVIDER_URL", provider_url.into()),
        ("TRIAGE_PROVIDER_API_KEY", "sk-test".into()),
        // One call and its write fit an invocation (the worker refuses it otherwise).
        ("TRIAGE_INVOCATION_SECONDS", "4".into()),
        ("TRIAGE_CALL_TIMEOUT_SECONDS", "2".into()),
        ("TRIAGE_BACKOFF_BASE_SECONDS", "0.05".into()),
        ("TRIAGE_BACKOFF_MAX_SECONDS", "0.5".into()),
        ("TRIAGE_JITTER_MAX_SECONDS", "0.05".into()),
        ("RUST_LOG", "warn".into()),
    ]
}

/// A free loopback address (`127.0.0.1:PORT`) for a `triage serve --listen`.
pub fn free_loopback_address() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// The binary `bin` with `args`, its stderr in `log`, killed when dropped.
pub fn spawn(bin: &Path, env: &[(&'static str, String)], args: &[&str], log: &Path) -> Child {
    let log = File::create(log).unwrap();
    Command::new(bin)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start triage")
}
