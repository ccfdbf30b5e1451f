//! A second throwaway PostgreSQL that looks like RDS: TLS only, password logins, and a
//! certificate for `localhost` from a CA made for this run (plus a second CA that signed
//! nothing). Started once per run by `scripts/local-postgres` under `target/`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use triage::{config::Config, db::DbTls, tls::CaRoots};

pub const PASSWORD: &str = "triage-tls-test";

pub struct TlsPostgres {
    pub port: u16,
    pub ca: CaRoots,
    pub other_ca: CaRoots,
}

pub fn server() -> &'static TlsPostgres {
    static SERVER: OnceLock<TlsPostgres> = OnceLock::new();
    SERVER.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = root.join("target/test-postgres-tls");
        let certs = dir.join("certs");
        std::fs::create_dir_all(&certs).unwrap();
        make_certificates(&certs);
        let out = Command::new("bash")
            .arg(root.join("scripts/local-postgres"))
            .arg("start")
            .arg(&dir)
            .env("LOCAL_PG_TLS_CERT", certs.join("server.crt"))
            .env("LOCAL_PG_TLS_KEY", certs.join("server.key"))
            .env("LOCAL_PG_PASSWORD", PASSWORD)
            .output()
            .expect("run scripts/local-postgres");
        assert!(
            out.status.success(),
            "TLS postgres: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url: tokio_postgres::Config = String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let read = |name: &str| CaRoots(std::fs::read(certs.join(name)).unwrap().into());
        TlsPostgres {
            port: url.get_ports()[0],
            ca: read("ca.crt"),
            other_ca: read("other-ca.crt"),
        }
    })
}

impl TlsPostgres {
    /// `DATABASE_URL` for `host`, verified against `roots`.
    pub fn config(&self, host: &str, dbname: &str, roots: &CaRoots) -> Config {
        let mut config = Config::local(&format!(
            "postgres://triage_admin:{PASSWORD}@{host}:{}/{dbname}",
            self.port
        ));
        config.database.tls = Some(DbTls::VerifyFull {
            roots: roots.clone(),
        });
        config.database.connect_timeout = std::time::Duration::from_secs(5);
        config
    }

    /// Runs `sql` as the master login (CREATEROLE CREATEDB, as RDS's), over verified TLS.
    pub async fn admin(&self, sql: &str) {
        let config = self.config("localhost", "postgres", &self.ca);
        let pool = triage::db::pool(&config.database).unwrap();
        let client = pool.get().await.expect("admin connection over TLS");
        client.batch_execute(sql).await.unwrap();
    }

    /// A new database, named after a fresh uuid.
    pub async fn fresh_database(&self) -> String {
        let name = format!("tls_{}", uuid::Uuid::new_v4().simple());
        self.admin(&format!("CREATE DATABASE {name}")).await;
        name
    }

    /// A new login role with `password` (a rotation changes it).
    pub async fn fresh_role(&self, password: &str) -> String {
        let name = format!("role_{}", uuid::Uuid::new_v4().simple());
        self.admin(&format!("CREATE ROLE {name} LOGIN PASSWORD '{password}'"))
            .await;
        name
    }
}

/// A throwaway CA, a server certificate it signs for `localhost` only (so `127.0.0.1` is the
/// wrong name), and an unrelated CA. New every run: nothing here outlives the test server.
fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl command makes the test certificates");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for ca in ["ca", "other-ca"] {
        let (key, crt, subject) = (
            format!("{ca}.key"),
            format!("{ca}.crt"),
            format!("/CN=triage test {ca}"),
        );
        let mut args = vec![
            "req", "-x509", "-days", "2", "-subj", &subject, "-keyout", &key, "-out", &crt,
        ];
        args.extend(ec);
        args.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(&args);
    }
    let mut args = vec![
        "req",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ];
    args.extend(ec);
    openssl(&args);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-days",
        "2",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-extfile",
        "server.ext",
        "-out",
        "server.crt",
    ]);
}

/// Whether the session behind `client` is encrypted.
pub async fn uses_tls(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}
