//! What the tests of every crate share: a fresh database on one real PostgreSQL server, and
//! a Lambda Runtime API emulator that runs the real function binaries over loopback; for the
//! deployment paths, moto as Secrets Manager and a stand-in for CloudFormation's ResponseURL.

pub mod cloudformation;
pub mod lambda;
pub mod markdown;
pub mod moto;
mod postgres;
pub mod template;

pub use postgres::{fresh_database, psql, roles_sql, server_url, OwnServer};

/// The count (the first column of the one row) `sql` returns.
pub async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// What `program args` prints, run in `dir`; a failure (or a missing program, which the docs'
/// commands need) fails the test.
pub fn stdout_of(program: &str, args: &[&str], dir: &std::path::Path) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (the docs' commands need it)"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
