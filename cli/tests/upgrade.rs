//! A deploy as the fleet lives through it (docs/deploy.md, "Upgrade to a new release"): the
//! previous release's `triage` binary, built from git, runs against the schema of this one.
//!
//! The previous release is the commit before the newest change to `migrations/` on this
//! branch's first-parent history (main's: the merge that brought the newest migrations), or
//! `TRIAGE_PREVIOUS_RELEASE` (a tag or commit). Its tree comes from `git archive` and its
//! binary from `cargo build` into this workspace's target directory (the dependencies are
//! shared, so only the workspace's own crates compile again).
//!
//! The sequence: the old release migrates and ingests; the new migrations are applied while
//! the old API keeps serving (the `Migration` custom resource runs before any function
//! updates); both APIs ingest; only the old worker runs (the functions that have not updated
//! yet) and must finish every job, none dead; then the old release's `migrate` runs again
//! against the newer schema (a rollback redeploys the old release) and must succeed.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use fake_provider::FakeProvider;
use tokio::process::Child;

mod processes;

const TRIAGE: &str = env!("CARGO_BIN_EXE_triage");
const TICKETS_PER_STEP: usize = 4;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn git(args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root())
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The previous release's commit: `TRIAGE_PREVIOUS_RELEASE`, else the parent of the newest
/// commit that changed `migrations/` on the first-parent line.
fn previous_release() -> String {
    let rev = std::env::var("TRIAGE_PREVIOUS_RELEASE").unwrap_or_else(|_| {
        let newest = git(&["log", "--first-parent", "-1", "--format=%H", "--", "migrations/"]);
        assert!(
            !newest.is_empty(),
            "no commit changed migrations/: is this a shallow clone? (fetch the history, or set TRIAGE_PREVIOUS_RELEASE)"
        );
        format!("{newest}^")
    });
    git(&["rev-parse", "--verify", &format!("{rev}^{{commit}}")])
}

/// The previous release's `triage` binary, built once per commit.
fn build_previous(commit: &str) -> PathBuf {
    let tree = root().join("target/upgrade").join(&commit[..12]);
    if !tree.join("Cargo.toml").exists() {
        std::fs::create_dir_all(&tree).unwrap();
        let tar = tree.with_extension("tar");
        git(&[
            "archive",
            "--format=tar",
            "-o",
            tar.to_str().unwrap(),
            commit,
        ]);
        let status = std::process::Command::new("tar")
            .arg("-xf")
            .arg(&tar)
            .arg("-C")
            .arg(&tree)
            .status()
            .unwrap();
        assert!(status.success(), "tar -xf {}", tar.display());
        std::fs::remove_file(&tar).unwrap();
    }
    let target = root().join("target/upgrade/target");
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "-p",
            "triage-cli",
            "--bin",
            "triage",
            "--manifest-path",
        ])
        .arg(tree.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the previous release {commit} builds");
    target.join("debug/triage")
}

/// A `triage` process (the binary `bin`), its log under `target/upgrade/logs/`.
fn spawn(bin: &Path, env: &[(&'static str, String)], args: &[&str], log: &str) -> Child {
    processes::spawn(
        bin,
        env,
        args,
        &processes::log_dir("upgrade/logs").join(log),
    )
}

async fn migrate(bin: &Path, env: &[(&'static str, String)], log: &str) {
    let status = spawn(bin, env, &["migrate"], log).wait().await.unwrap();
    assert!(
        status.success(),
        "{} migrate failed: target/upgrade/logs/{log}",
        bin.display()
    );
}

/// A `triage serve` on a free loopback port, answering once it does.
async fn serve(bin: &Path, env: &[(&'static str, String)], log: &str) -> (Child, String) {
    let listen = processes::free_loopback_address();
    let child = spawn(bin, env, &["serve", "--listen", &listen], log);
    let api = format!("http://{listen}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(&listen).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "{log}: the API never listened (target/upgrade/logs/{log})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, api)
}

async fn ingest(http: &reqwest::Client, api: &str, label: &str) {
    for n in 0..TICKETS_PER_STEP {
        let response = http
            .post(format!("{api}/tickets"))
            .json(&serde_json::json!({
                "subject": format!("Upgrade {label} {n}"),
                "message": "The invoice total is wrong.",
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 201, "{label} ticket {n}");
    }
}

/// `status → count` of the outbox (columns every schema version has).
async fn outbox(database_url: &str) -> Vec<(String, i64)> {
    let (db, connection) = tokio_postgres::connect(database_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    db.query(
        "SELECT status::text, count(*) FROM evaluation_outbox GROUP BY 1 ORDER BY 1",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|row| (row.get(0), row.get(1)))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_release_keeps_working_against_the_new_schema() {
    let commit = previous_release();
    let previous = tokio::task::spawn_blocking(move || build_previous(&commit))
        .await
        .unwrap();
    let current = PathBuf::from(TRIAGE);
    let provider = FakeProvider::start().await;
    let database_url = testkit::fresh_database().await;
    let env = processes::environment(&database_url, &provider.url());
    let http = triage::tls::https_client_builder().build().unwrap();

    // The previous release, as it ran before the deploy.
    migrate(&previous, &env, "old-migrate.log").await;
    let (_old_api, old_api) = serve(&previous, &env, "old-serve.log").await;
    ingest(&http, &old_api, "before").await;

    // The deploy: the new migrations first, with the old API still serving.
    migrate(&current, &env, "new-migrate.log").await;
    let (_new_api, new_api) = serve(&current, &env, "new-serve.log").await;
    ingest(&http, &new_api, "new-api").await;
    ingest(&http, &old_api, "old-api").await;

    // Only the old worker runs (not updated yet): it finishes every job on the new schema.
    let mut old_worker = spawn(&previous, &env, &["worker"], "old-worker.log");
    let want = vec![("done".to_string(), 3 * TICKETS_PER_STEP as i64)];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = outbox(&database_url).await;
        if seen == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the old worker did not finish: outbox {seen:?} (target/upgrade/logs/old-worker.log)"
        );
        if let Some(status) = old_worker.try_wait().unwrap() {
            panic!("the old worker exited ({status}): target/upgrade/logs/old-worker.log");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(provider.billed_calls().len(), 3 * TICKETS_PER_STEP);

    // A rollback redeploys the old release: its migrate meets a schema ahead of it.
    migrate(&previous, &env, "old-migrate-again.log").await;
}
