//! `triage serve` off loopback, as the binary decides it from its flags and tokens: each of the
//! API and the console only when asked for, and only with its token (docs/runbook.md
//! "Security").

use std::{process::Stdio, time::Duration};

use tokio::process::Command;

const TRIAGE: &str = env!("CARGO_BIN_EXE_triage");
const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";

/// A port free on every address at the time of asking.
fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn serve(database_url: &str, listen: &str, flags: &[&str]) -> Command {
    let mut command = Command::new(TRIAGE);
    command
        .args(["serve", "--listen", listen])
        .args(flags)
        .env("DATABASE_URL", database_url)
        .env_remove("TRIAGE_API_TOKEN")
        .env_remove("TRIAGE_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
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
    let port = free_port();
    let _server = serve(&url, &format!("0.0.0.0:{port}"), &["--allow-remote-admin"])
        .env("TRIAGE_ADMIN_TOKEN", ADMIN_TOKEN)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Awaited, not slept: the server answers once it has bound.
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < until,
            "triage serve never listened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let client = triage::tls::https_client_builder().build().unwrap();
    let post = client
        .post(format!("http://127.0.0.1:{port}/tickets"))
        .header("host", format!("10.0.1.25:{port}"))
        .header("content-type", "application/json")
        .body(r#"{"subject":"a","message":"b"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 404, "the API is not served here");
    let console = client
        .get(format!("http://127.0.0.1:{port}/admin/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(console.status(), 200, "the console is, behind its sign-in");
}
