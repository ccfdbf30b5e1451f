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

impl LocalPostgres {
    /// The URL without its password, for the terminal: the master login's password is a
    /// secret like any other (it is in the cluster's directory).
    pub fn shown_url(&self) -> String {
        match self.url.split_once("://").and_then(|(scheme, rest)| {
            let (login, host) = rest.split_once('@')?;
            let user = login.split(':').next()?;
            Some(format!("{scheme}://{user}:***@{host}"))
        }) {
            Some(shown) => shown,
            None => self.url.clone(),
        }
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
