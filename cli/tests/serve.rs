//! `triage serve` off loopback, as the binary decides it from its flags and tokens: each of the
//! API and the console only when asked for, only with its token, and only over TLS
//! (docs/runbook.md "Security"); and a server, or `triage dev`, on a port already taken.

use std::{
    ffi::{OsStr, OsString},
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tempfile::TempDir;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};
use triage::tls::CaRoots;

const TRIAGE: &str = env!("CARGO_BIN_EXE_triage");
const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";
const API_TOKEN: &str = "api-token-0123456789abcdef";
/// Bounds a run that should have ended at once (one that serves instead would never end).
const EXIT_WITHIN: Duration = Duration::from_secs(60);

/// A port free on every address at the time of asking.
fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn serve(database_url: &str, listen: &str, flags: &[&str]) -> Command {
    server("serve", database_url, listen, flags)
}

/// `triage serve` or `triage dev` (`subcommand`) on `listen`.
fn server(subcommand: &str, database_url: &str, listen: &str, flags: &[&str]) -> Command {
    let mut command = Command::new(TRIAGE);
    command
        .args([subcommand, "--listen", listen])
        .args(flags)
        .env("DATABASE_URL", database_url)
        .env_remove("TRIAGE_API_TOKEN")
        .env_remove("TRIAGE_ADMIN_TOKEN")
        .env_remove("TRIAGE_TLS_CERT")
        .env_remove("TRIAGE_TLS_KEY")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// The run of `command`, which must end (not serve) and fail; its stderr.
async fn refused(command: &mut Command) -> String {
    let out = tokio::time::timeout(EXIT_WITHIN, command.output())
        .await
        .expect("triage serve served instead of refusing to start")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "started: {stderr}");
    stderr
}

/// A self-signed certificate for 127.0.0.1 and its key, made by the openssl command for one
/// test (as shared/tests/pipeline/tls_postgres.rs makes its CAs): nothing to commit or expire.
struct SelfSigned {
    cert: PathBuf,
    key: PathBuf,
    _dir: TempDir,
}

impl SelfSigned {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("openssl")
            .args(["req", "-x509", "-days", "2", "-nodes", "-newkey", "ec"])
            .args(["-pkeyopt", "ec_paramgen_curve:prime256v1"])
            .args(["-subj", "/CN=triage serve test"])
            .args(["-addext", "subjectAltName=IP:127.0.0.1"])
            .args(["-addext", "basicConstraints=critical,CA:FALSE"])
            .args(["-addext", "extendedKeyUsage=serverAuth"])
            .args(["-keyout", "key.pem", "-out", "cert.pem"])
            .current_dir(dir.path())
            .output()
            .expect("the openssl command makes the test certificate");
        assert!(
            out.status.success(),
            "openssl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
            _dir: dir,
        }
    }

    fn flags(&self) -> [OsString; 4] {
        tls_flags(&self.cert, &self.key)
    }

    /// A client trusting this certificate only, following no redirects.
    fn client(&self) -> reqwest::Client {
        let roots = CaRoots(std::fs::read(&self.cert).unwrap().into());
        reqwest::Client::builder()
            .tls_backend_preconfigured(triage::tls::database_config(&roots).unwrap())
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }
}

fn tls_flags(cert: &Path, key: &Path) -> [OsString; 4] {
    [
        "--tls-cert".as_ref(),
        cert.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
    ]
    .map(OsStr::to_owned)
}

/// `command` started, and the port it serves HTTPS on, read from what it prints once bound.
async fn serving_https(command: &mut Command) -> (Child, u16) {
    let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let port = tokio::time::timeout(EXIT_WITHIN, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some((_, url)) = line.split_once("https://") {
                let authority = url.split(['/', ' ']).next().unwrap();
                return Some(authority.rsplit_once(':').unwrap().1.parse().unwrap());
            }
            said.push(line);
        }
        None
    })
    .await
    .expect("triage serve said nothing of HTTPS");
    let port = port.unwrap_or_else(|| panic!("triage serve ended: {}", said.join("\n")));
    // Drained, so its logs never fill the pipe and stall it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

/// The `Set-Cookie` of `response` for cookie `name`.
fn set_cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .find(|cookie| cookie.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie: {response:?}"))
}

#[tokio::test]
async fn off_loopback_a_flag_without_its_token_or_no_flag_at_all_refuses_to_start() {
    let url = testkit::fresh_database().await;
    let listen = format!("0.0.0.0:{}", free_port());
    for (flags, says) in [
        (&["--allow-remote-api"][..], "TRIAGE_API_TOKEN"),
        (&["--allow-remote-admin"][..], "TRIAGE_ADMIN_TOKEN"),
        (&[][..], "nothing to serve"),
    ] {
        let out = serve(&url, &listen, flags).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
}

#[tokio::test]
async fn off_loopback_with_only_the_console_asked_for_the_api_is_not_served() {
    let url = testkit::fresh_database().await;
    let certificate = SelfSigned::new();
    let (_server, port) = serving_https(
        serve(&url, "0.0.0.0:0", &["--allow-remote-admin"])
            .args(certificate.flags())
            .env("TRIAGE_ADMIN_TOKEN", ADMIN_TOKEN),
    )
    .await;
    let client = certificate.client();
    let post = client
        .post(format!("https://127.0.0.1:{port}/tickets"))
        .header("host", format!("10.0.1.25:{port}"))
        .header("content-type", "application/json")
        .body(r#"{"subject":"a","message":"b"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 404, "the API is not served here");
    let console = client
        .get(format!("https://127.0.0.1:{port}/admin/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(console.status(), 200, "the console is, behind its sign-in");
}

#[tokio::test]
async fn off_loopback_without_a_certificate_it_refuses_to_start() {
    let url = testkit::fresh_database().await;
    for (flag, token_env, token) in [
        ("--allow-remote-api", "TRIAGE_API_TOKEN", API_TOKEN),
        ("--allow-remote-admin", "TRIAGE_ADMIN_TOKEN", ADMIN_TOKEN),
    ] {
        let stderr = refused(serve(&url, "0.0.0.0:0", &[flag]).env(token_env, token)).await;
        for says in ["not a loopback address", "--tls-cert", "--tls-key"] {
            assert!(stderr.contains(says), "{flag}: {stderr}");
        }
    }
}

#[tokio::test]
async fn with_a_certificate_it_serves_https_only_and_a_silent_client_stalls_no_one() {
    let url = testkit::fresh_database().await;
    let migrated = Command::new(TRIAGE)
        .arg("migrate")
        .env("DATABASE_URL", &url)
        .output()
        .await
        .unwrap();
    assert!(migrated.status.success(), "{migrated:?}");
    let certificate = SelfSigned::new();
    let (_server, port) = serving_https(
        serve(&url, "0.0.0.0:0", &["--allow-remote-api"])
            .args(certificate.flags())
            .env("TRIAGE_API_TOKEN", API_TOKEN),
    )
    .await;
    // Connects and never says hello: its handshake must not hold up the next connection's
    // (it would for the 10 s handshake timeout if the accept loop waited on it).
    let _silent = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let client = certificate.client();
    let tickets = format!("https://127.0.0.1:{port}/tickets");
    let unsigned = client
        .post(&tickets)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("an HTTPS answer while another handshake is pending");
    assert_eq!(unsigned.status(), 401, "the token is still required");
    let created = client
        .post(&tickets)
        .bearer_auth(API_TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"subject":"over TLS","message":"ticket text"}"#)
        .send()
        .await
        .unwrap();
    assert!(created.status().is_success(), "{created:?}");
    let plain = client
        .post(format!("http://127.0.0.1:{port}/tickets"))
        .bearer_auth(API_TOKEN)
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP answered: {plain:?}");
}

#[tokio::test]
async fn over_tls_the_console_cookies_are_secure() {
    let url = testkit::fresh_database().await;
    let certificate = SelfSigned::new();
    let (_server, port) = serving_https(
        serve(&url, "0.0.0.0:0", &["--allow-remote-admin"])
            .args(certificate.flags())
            .env("TRIAGE_ADMIN_TOKEN", ADMIN_TOKEN),
    )
    .await;
    let client = certificate.client();
    let login = format!("https://127.0.0.1:{port}/admin/login");
    let form = client.get(&login).send().await.unwrap();
    let csrf_cookie = set_cookie(&form, "triage_csrf");
    let page = form.text().await.unwrap();
    let csrf = page
        .split_once(r#"name="csrf" value=""#)
        .and_then(|(_, rest)| rest.split_once('"'))
        .expect("the sign-in form's CSRF token")
        .0;
    let signed_in = client
        .post(&login)
        .header("cookie", csrf_cookie.split(';').next().unwrap())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={ADMIN_TOKEN}&csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303, "signed in");
    let session_cookie = set_cookie(&signed_in, "triage_admin");
    for cookie in [&csrf_cookie, &session_cookie] {
        assert!(cookie.contains("; Secure"), "{cookie}");
    }
}

#[tokio::test]
async fn a_certificate_or_key_that_cannot_serve_tls_refuses_to_start_and_says_which() {
    let url = testkit::fresh_database().await;
    let (one, other) = (SelfSigned::new(), SelfSigned::new());
    let missing = one.cert.with_file_name("missing.pem");
    let cases = [
        (one.flags()[..2].to_vec(), "--tls-key".into()),
        (
            tls_flags(&missing, &one.key).to_vec(),
            format!("cannot read {}", missing.display()),
        ),
        (
            tls_flags(&one.key, &one.key).to_vec(),
            format!("{} holds no PEM certificate", one.key.display()),
        ),
        (
            tls_flags(&one.cert, &one.cert).to_vec(),
            format!("{} holds no PEM private key", one.cert.display()),
        ),
        (
            tls_flags(&one.cert, &other.key).to_vec(),
            "cannot serve TLS".to_string(),
        ),
    ];
    for (flags, says) in cases {
        let stderr = refused(
            serve(&url, "0.0.0.0:0", &["--allow-remote-api"])
                .args(&flags)
                .env("TRIAGE_API_TOKEN", API_TOKEN),
        )
        .await;
        assert!(stderr.contains(&says), "{flags:?}: {stderr}");
    }
}

/// A second `triage dev` or `triage serve` on a port already taken ends at once, non-zero,
/// naming the port and `--listen` (issue "Round five", item 9): it binds before it starts a
/// throwaway PostgreSQL or migrates, and a server that cannot serve does not leave the
/// worker, deliverer and sweeper running without it.
#[tokio::test]
async fn a_second_server_on_a_taken_port_ends_at_once_naming_the_port_and_the_flag() {
    let url = testkit::fresh_database().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let port = taken.local_addr().unwrap().port().to_string();
    for (command, database_url) in [("dev", url.as_str()), ("dev", ""), ("serve", url.as_str())] {
        let stderr = refused(&mut server(command, database_url, &listen, &[])).await;
        assert!(
            stderr.contains(&port) && stderr.contains("--listen"),
            "{command} (DATABASE_URL {database_url:?}): {stderr}"
        );
    }
}
