//! How long the local classifier takes to answer one ticket, asked as the worker asks it
//! (`pipeline::cascade::ask`: `LocalProvider` behind the `Provider` trait, then the contract).
//! `scripts/bench cascade` runs it (docs/quality.md, "The cascade"):
//!
//! `local_answer ARTEFACT SET.jsonl [ROUNDS]`: the artefact's bytes (`local_model.artefact`),
//! a labelled set whose rows are the tickets (every row, ROUNDS times, default 20). Prints one
//! JSON line: the tickets answered and the time per answer (mean, p50, p99, max, microseconds),
//! after one unmeasured round.

use std::{sync::Arc, time::Instant};

use triage::{
    domain::versions::ModelVersion,
    pipeline::cascade,
    providers::{classifier::LocalModel, EvaluationRequest, Policy, Prompt, Tier},
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [artefact, set, rest @ ..] = args.as_slice() else {
        return Err("usage: local_answer ARTEFACT SET.jsonl [ROUNDS]".into());
    };
    let rounds: usize = rest.first().map_or(Ok(20), |r| r.parse())?;
    let loading = Instant::now();
    let model = Arc::new(LocalModel::from_bytes(&std::fs::read(artefact)?)?);
    let load_ms = loading.elapsed().as_secs_f64() * 1e3;
    let tickets: Vec<(String, String)> = std::fs::read_to_string(set)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line)?;
            let text = |f: &str| row[f].as_str().unwrap_or_default().to_string();
            Ok((text("subject"), text("message")))
        })
        .collect::<Result<_, serde_json::Error>>()?;
    if tickets.is_empty() || rounds == 0 {
        return Err("no tickets to answer".into());
    }
    let policy = Policy::load("policy-v1").ok_or("policy-v1 is not in this build")?;
    let prompt = Prompt::load("triage-v6", &policy).ok_or("triage-v6 is not in this build")?;
    let version: ModelVersion =
        format!("cascade({},0.9,gpt-6-luna@medium)", model.version()).parse()?;
    let mut times = Vec::with_capacity(tickets.len() * rounds);
    let mut answered = 0;
    for round in 0..=rounds {
        for (subject, message) in &tickets {
            let request = EvaluationRequest {
                subject,
                message,
                prompt: &prompt,
                model: &version,
                policy: &policy,
                timeout: std::time::Duration::ZERO,
                tier: Tier::Online,
            };
            let started = Instant::now();
            let answer = cascade::ask(model.clone(), request).await;
            let took = started.elapsed().as_secs_f64() * 1e6;
            // The first round warms the caches and is not counted.
            if round > 0 {
                times.push(took);
                answered += usize::from(answer.is_some());
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    println!(
        "{}",
        serde_json::json!({
            "version": model.version(), "tickets": tickets.len(), "rounds": rounds,
            "answers": times.len(), "answered": answered, "load_ms": load_ms,
            "mean_us": mean, "p50_us": at(0.5), "p99_us": at(0.99), "max_us": at(1.0),
        })
    );
    Ok(())
}
