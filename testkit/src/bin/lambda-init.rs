//! Init time of function binaries, as Lambda measures it (process start to the first poll of
//! the Runtime API), over repeated cold starts, against SPEC's 15 ms budget. `scripts/bench
//! init` runs it on the release builds.
//!
//!   lambda-init [--runs N] BINARY...
//!
//! Every function gets the configuration a deployment gives it (TLS to the database with the
//! embedded RDS CAs, an OpenAI-compatible provider), pointing at addresses where nothing
//! listens: init must not need the network, so nothing is reached.

use std::time::Duration;

use testkit::lambda::{Function, RuntimeApi};

const BUDGET: Duration = Duration::from_millis(15);

const ENV: [(&str, &str); 5] = [
    ("DATABASE_URL", "postgres://triage@127.0.0.1:9/triage"),
    ("TRIAGE_PROVIDER", "openai"),
    ("TRIAGE_PROVIDER_URL", "http://127.0.0.1:9/v1"),
    ("TRIAGE_PROVIDER_API_KEY", "bench"),
    ("RUST_LOG", "warn"),
];

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut runs = 20;
    if args.first().map(String::as_str) == Some("--runs") {
        runs = args
            .get(1)
            .and_then(|n| n.parse().ok())
            .expect("--runs takes a number");
        args.drain(..2);
    }
    assert!(!args.is_empty(), "usage: lambda-init [--runs N] BINARY...");
    println!(
        "  {:<24} {:>9} {:>9} {:>9} {:>9} {:>12}",
        "function", "min ms", "p50 ms", "p90 ms", "max ms", "bytes"
    );
    for binary in &args {
        let mut times = Vec::with_capacity(runs);
        let mut size = 0;
        for _ in 0..runs {
            let api = RuntimeApi::start().await;
            let function = Function::spawn(binary, &api, ENV);
            times.push(function.init_time(&api).await);
            size = function.size();
        }
        times.sort();
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        let name = std::path::Path::new(binary).file_name().unwrap();
        println!(
            "  {:<24} {:>9} {:>9} {:>9} {:>9} {:>12}",
            name.to_string_lossy(),
            ms(times[0]),
            ms(at(0.5)),
            ms(at(0.9)),
            ms(times[times.len() - 1]),
            size
        );
    }
    println!(
        "  target: init (p50) within {} ms; {runs} cold starts each",
        BUDGET.as_millis()
    );
}
