//! A function's process, started as Lambda starts it: the Runtime API address and the
//! function's identity in the environment, stdout (EMF metrics) and stderr (JSON logs)
//! captured line by line.

use std::{
    ffi::OsStr,
    io::{BufRead, BufReader, Read},
    path::Path,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::Value;
use tokio::sync::watch;

use super::RuntimeApi;

/// How long to wait for a line or the first poll: generous, for a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// A running function; dropping it kills the process (and prints what it wrote, when a
/// test is failing).
pub struct Function {
    name: String,
    size: u64,
    child: Child,
    started: Instant,
    stdout: Output,
    stderr: Output,
}

impl Function {
    /// Starts `binary` against `api` with the variables the Lambda runtime reads, plus
    /// `env`. Nothing else is inherited: a developer's `DATABASE_URL` or `TRIAGE_*` must not
    /// reach the function under test.
    pub fn spawn<K, V>(
        binary: impl AsRef<Path>,
        api: &RuntimeApi,
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Self
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let binary = binary.as_ref();
        let name = binary.file_name().unwrap().to_string_lossy().into_owned();
        let size = std::fs::metadata(binary)
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()))
            .len();
        let mut command = Command::new(binary);
        command
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", api.addr().to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", &name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/30/[$LATEST]testkit")
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let stdout = Output::capture(child.stdout.take().unwrap());
        let stderr = Output::capture(child.stderr.take().unwrap());
        Self {
            name,
            size,
            child,
            started,
            stdout,
            stderr,
        }
    }

    /// EMF metric documents, one JSON object a line.
    pub fn stdout(&self) -> &Output {
        &self.stdout
    }

    /// Logs, one JSON object a line.
    pub fn stderr(&self) -> &Output {
        &self.stderr
    }

    /// Checks the telemetry of a process that has served one invocation, `request_id`:
    /// every log line on stderr is JSON inside the runtime's invocation span (which carries
    /// `requestId`), every line on stdout is an EMF document in `namespace` with `requestId`,
    /// and none of `never` (ticket text, secrets) appears in either stream. Call it once the
    /// invocation's last line has come through ([`Output::wait_for`]).
    pub fn assert_telemetry(&self, request_id: &str, namespace: &str, never: &[&str]) {
        for line in self.stderr.lines() {
            let log: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
            let spans = log["spans"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            assert!(
                spans.iter().any(|span| span["requestId"] == request_id),
                "log line outside invocation {request_id}: {line}"
            );
        }
        for line in self.stdout.lines() {
            let document: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            assert_eq!(document["requestId"], request_id, "{line}");
            assert_eq!(
                document["_aws"]["CloudWatchMetrics"][0]["Namespace"], namespace,
                "{line}"
            );
        }
        for line in self.stderr.lines().iter().chain(&self.stdout.lines()) {
            for text in never {
                assert!(!line.contains(text), "{text:?} was written: {line}");
            }
        }
    }

    /// Prints, for the record rather than as an assertion (debug builds on a shared machine
    /// say little about Lambda), the init time (process start to the first poll for an
    /// event) and the size of the binary.
    pub async fn print_init_and_size(&self, api: &RuntimeApi) {
        let init = self.init_time(api).await;
        println!(
            "{}: init {:.1} ms (process start to first /next), binary {:.1} MB",
            self.name,
            init.as_secs_f64() * 1e3,
            self.size as f64 / 1e6
        );
    }
}

impl Function {
    /// Process start to the first poll for an event: what Lambda reports as Init Duration.
    pub async fn init_time(&self, api: &RuntimeApi) -> Duration {
        api.first_poll(PATIENCE).await - self.started
    }

    /// How the process ended, once it ends on its own (a crash, an abort); panics after
    /// `timeout`. The child has no async handle, so its status is polled.
    pub async fn exit_status(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child's status") {
                return status;
            }
            assert!(
                Instant::now() < until,
                "{} still runs after {timeout:?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The binary's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The process's peak resident memory so far (`VmHWM`), in bytes, where the kernel says:
    /// what Lambda holds against the function's memory ("Max Memory Used").
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kb = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))?
            .trim()
            .strip_suffix("kB")?
            .trim();
        Some(kb.parse::<u64>().ok()? * 1024)
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let exited = self.child.try_wait().ok().flatten();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- {} (exited on its own: {exited:?})\n--- stdout:\n{}\n--- stderr:\n{}",
                self.name,
                self.stdout.lines().join("\n"),
                self.stderr.lines().join("\n")
            );
        }
    }
}

/// One output stream of the process, captured line by line as it is written.
pub struct Output(Arc<watch::Sender<Vec<String>>>);

impl Output {
    fn capture(pipe: impl Read + Send + 'static) -> Self {
        let lines = Arc::new(watch::Sender::new(Vec::new()));
        let writer = lines.clone();
        // std's pipes block, so a plain thread reads each one.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                writer.send_modify(|lines| lines.push(line));
            }
        });
        Self(lines)
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.borrow().clone()
    }

    /// Waits for a line that contains `needle` and returns it. Output arrives through a
    /// pipe, so a line written during an invocation may land after the invocation's answer.
    pub async fn wait_for(&self, needle: &str) -> String {
        let mut lines = self.0.subscribe();
        let found = tokio::time::timeout(
            PATIENCE,
            lines.wait_for(|lines| lines.iter().any(|line| line.contains(needle))),
        )
        .await;
        match found {
            Ok(Ok(lines)) => lines
                .iter()
                .find(|line| line.contains(needle))
                .unwrap()
                .clone(),
            _ => panic!(
                "no line with {needle:?} within {PATIENCE:?}; seen:\n{}",
                self.lines().join("\n")
            ),
        }
    }
}
