//! `triage dev` without `DATABASE_URL`: a throwaway PostgreSQL, through the same script the
//! tests use (embedded, so the binary works outside the repo), removed on exit.

use std::process::Command;

use anyhow::{bail, Context};

const SCRIPT: &str = include_str!("../../scripts/local-postgres");

pub struct LocalPostgres {
    dir: tempfile::TempDir,
    pub url: String,
}

impl LocalPostgres {
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("triage-dev-pg").tempdir()?;
        let out = run(&["start", &dir.path().to_string_lossy()])?;
        let url = String::from_utf8(out)?.trim().to_string();
        Ok(Self { dir, url })
    }
}

impl Drop for LocalPostgres {
    fn drop(&mut self) {
        let _ = run(&["stop", &self.dir.path().to_string_lossy()]);
    }
}

fn run(args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let output = Command::new("bash")
        .arg("-c")
        .arg(SCRIPT)
        .arg("local-postgres")
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running bash for the local PostgreSQL")?;
    if !output.status.success() {
        bail!("could not start a local PostgreSQL (see above)");
    }
    Ok(output.stdout)
}
