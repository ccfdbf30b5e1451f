//! A local Secrets Manager: moto's server (PyPI `moto[server]`, which `scripts/test` installs
//! under `target/test-tools/`), started once per test process on a free loopback port. If it
//! cannot be started, the tests that need it say so loudly and skip; everything else still runs.
//! With `MOTO_SERVER` set (as `scripts/test` and so CI do) they fail instead.

use std::{
    io::{BufRead, BufReader, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    process::{Command, Stdio},
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

/// The AWS variables that point an SDK client (or a function under test) at moto, with dummy
/// credentials; `None`, after a loud message, when moto cannot be started.
pub fn aws_env() -> Option<Vec<(&'static str, String)>> {
    let endpoint = endpoint()?;
    Some(vec![
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_ENDPOINT_URL", endpoint.into()),
    ])
}

fn endpoint() -> Option<&'static str> {
    static ENDPOINT: OnceLock<Option<String>> = OnceLock::new();
    ENDPOINT
        .get_or_init(|| match start() {
            Ok(url) => Some(url),
            // `scripts/test` installed moto and named it: then a failed start is a failure.
            Err(why) if std::env::var_os("MOTO_SERVER").is_some() => {
                panic!("moto could not be started from MOTO_SERVER: {why}")
            }
            Err(why) => {
                // Straight to stderr: the test harness would hide eprintln! of passing tests.
                let _ = writeln!(
                    std::io::stderr(),
                    "\n!!!!! SKIPPING the Secrets Manager tests: moto could not be started ({why}).\n\
                     !!!!! `scripts/test` installs it; or set MOTO_SERVER to a moto_server binary.\n"
                );
                None
            }
        })
        .as_deref()
}

/// The moto_server binary: `MOTO_SERVER`, else the one `scripts/test` installs, else PATH's.
fn binary() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    std::env::var_os("MOTO_SERVER")
        .map(PathBuf::from)
        .or_else(|| Some(root.join("target/test-tools/bin/moto_server")).filter(|p| p.exists()))
        .unwrap_or_else(|| "moto_server".into())
}

/// A tool installed beside moto (`scripts/test` installs the AWS CLI there, and moto brings
/// python with boto3): its path, or `None` when moto itself is missing (see [`aws_env`]).
/// Under `MOTO_SERVER`, a missing tool is a failure, like a missing moto.
pub fn tool(name: &str) -> Option<PathBuf> {
    aws_env()?;
    let path = binary().parent().map(|dir| dir.join(name))?;
    if path.exists() {
        Some(path)
    } else if std::env::var_os("MOTO_SERVER").is_some() {
        panic!(
            "{} is missing beside MOTO_SERVER (scripts/test installs it)",
            path.display()
        )
    } else {
        let _ = writeln!(
            std::io::stderr(),
            "\n!!!!! SKIPPING: {} is missing; `scripts/test` installs it.\n",
            path.display()
        );
        None
    }
}

fn start() -> Result<String, String> {
    let binary = binary();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    // moto outlives nothing: a shell holds it and kills it when our end of its stdin closes,
    // which happens when this test process exits, however it exits.
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(r#"command -v "$0" >/dev/null || exit 127; "$0" -H 127.0.0.1 -p "$1" >/dev/null 2>&1 & moto=$!; echo started; read -r _; kill "$moto""#)
        .arg(&binary)
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    static HOLDER: Mutex<Vec<std::process::ChildStdin>> = Mutex::new(Vec::new());
    HOLDER.lock().unwrap().push(child.stdin.take().unwrap());
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let until = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if Instant::now() > until {
            return Err(format!(
                "{} did not listen on {addr} within 30 s",
                binary.display()
            ));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("{} exited: {status}", binary.display()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(format!("http://{addr}"))
}

/// The AWS CLI installed beside moto, run against `moto` (as [`aws_env`] gives it); its JSON
/// answer (`Null` for none). A failure is the test's, with the CLI's stderr.
pub fn aws(moto: &[(&'static str, String)], args: &[&str]) -> serde_json::Value {
    let cli = tool("aws").expect("moto is up, so the CLI is beside it");
    let get = |name: &str| {
        moto.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    };
    let output = Command::new(cli)
        .args(args)
        .args(["--output", "json", "--region", get("AWS_REGION").unwrap()])
        .args(["--endpoint-url", get("AWS_ENDPOINT_URL").unwrap()])
        .envs(moto.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "aws {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null)
}
