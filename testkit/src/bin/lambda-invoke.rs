//! One invocation of a function binary, as Lambda runs it (the Runtime API emulator), at the
//! memory Lambda would give it, with its peak resident memory: `scripts/bench train-memory`
//! drives the ops function's training with it.
//!
//!   lambda-invoke [--memory MB] [--timeout SECONDS] BINARY PAYLOAD [NAME=VALUE...]
//!
//! The function gets only the variables named (and the runtime's own, the memory among them).
//! Prints one JSON object: `result` (or `error`), `seconds` (the invocation, as the caller
//! waits for it), `peak_rss_bytes` (`VmHWM` of the process once it has answered) and
//! `memory_mb`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testkit::lambda::{Function, RuntimeApi};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let usage =
        "usage: lambda-invoke [--memory MB] [--timeout SECONDS] BINARY PAYLOAD [NAME=VALUE...]";
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (mut memory_mb, mut timeout) = (256u32, 900u64);
    while args.first().is_some_and(|a| a.starts_with("--")) {
        let value = args.get(1).and_then(|v| v.parse().ok()).expect(usage);
        match args[0].as_str() {
            "--memory" => memory_mb = value as u32,
            "--timeout" => timeout = value,
            _ => panic!("{usage}"),
        }
        args.drain(..2);
    }
    assert!(args.len() >= 2, "{usage}");
    let payload: Value = serde_json::from_str(&args[1]).expect("PAYLOAD is JSON");
    let memory = memory_mb.to_string();
    let mut env: Vec<(String, String)> = args[2..]
        .iter()
        .map(|pair| {
            let (name, value) = pair.split_once('=').expect(usage);
            (name.to_string(), value.to_string())
        })
        .collect();
    env.push(("AWS_LAMBDA_FUNCTION_MEMORY_SIZE".into(), memory));
    let api = RuntimeApi::start().await;
    let function = Function::spawn(&args[0], &api, env);
    function.init_time(&api).await;
    let started = Instant::now();
    let invocation = api.invoke(payload, Duration::from_secs(timeout)).await;
    let seconds = started.elapsed().as_secs_f64();
    let (result, error) = match invocation.result {
        Ok(result) => (result, Value::Null),
        Err(error) => (Value::Null, json!(format!("{error:?}"))),
    };
    println!(
        "{}",
        json!({
            "result": result,
            "error": error,
            "seconds": seconds,
            "peak_rss_bytes": function.peak_rss_bytes(),
            "memory_mb": memory_mb,
        })
    );
}
