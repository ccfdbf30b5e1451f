//! The operator commands shared/SPEC.md fixes, run as an operator runs them: the real binary
//! against a migrated database, `--json` on stdout, a refusal as a non-zero exit with its
//! reason on stderr and nothing stored.

mod cascade;
mod retire;
mod taxonomy;

use std::process::Output;

use serde_json::Value;

const TRIAGE: &str = env!("CARGO_BIN_EXE_triage");

/// `triage ARGS` against `database_url`, from the repository's root (where the docs run it).
pub(crate) async fn triage(database_url: &str, args: &[&str]) -> Output {
    triage_with(database_url, args, &[]).await
}

/// [`triage`] with more of SPEC's environment (`TRIAGE_MODEL`, say).
pub(crate) async fn triage_with(database_url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    tokio::process::Command::new(TRIAGE)
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env("DATABASE_URL", database_url)
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .output()
        .await
        .expect("triage runs")
}

pub(crate) async fn json(database_url: &str, args: &[&str]) -> Value {
    let out = triage(database_url, args).await;
    assert!(
        out.status.success(),
        "triage {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

pub(crate) async fn refused(database_url: &str, args: &[&str]) -> String {
    let out = triage(database_url, args).await;
    assert!(!out.status.success(), "triage {args:?} was not refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
