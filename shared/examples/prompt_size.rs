//! What a taxonomy's size costs per call (issue 38, "Scale"): the built-in 5 departments, the
//! bank's 77 (`examples/desks/bank/taxonomy.json`) and 300 (the bank's definitions repeated
//! under other names), each under triage-v6, sent through the OpenAI wire format to
//! fake-provider over loopback, which reports usage as the provider would (its prompt cache
//! serves the prefix a second call repeats). `scripts/bench prompt` runs it.
//!
//! Prints one line per size: the prompt's bytes, the input tokens of a first call and of a
//! second (another ticket), how many of those the cache served, and the cost of each at the
//! built-in price of gpt-6-luna, beside the 5 departments' figures.

use std::time::Duration;

use fake_provider::FakeProvider;
use serde_json::json;
use triage::{
    domain::{taxonomy::Taxonomy, versions::ModelVersion},
    providers::{
        AnyProvider, EvaluationRequest, Policy, PriceTable, Prompt, Provider, ProviderConfig,
        ProviderKind, Tier,
    },
    secret::Secret,
};

const BANK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/desks/bank/taxonomy.json"
);

/// The bank's taxonomy with its departments repeated to `n`, each under a name of its own.
fn of_size(bank: &serde_json::Value, n: usize) -> Policy {
    let departments: Vec<_> = (0..n)
        .map(|i| {
            let d = &bank["departments"][i % 77];
            json!({"name": format!("{}_{i}", d["name"].as_str().unwrap()), "description": d["description"]})
        })
        .collect();
    let file = json!({"name": "bank", "departments": departments, "urgent": bank["urgent"],
                      "urgent_threshold": bank["urgent_threshold"]});
    Policy::of_taxonomy(Taxonomy::parse(file.to_string().as_bytes()).expect("a valid taxonomy"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fake = FakeProvider::start().await;
    let config = ProviderConfig {
        kind: ProviderKind::OpenAi,
        url: fake.url(),
        api_key: Secret::from("sk-bench").into(),
        api_key_secret_arn: None,
        prices: PriceTable::default(),
    };
    let provider = AnyProvider::from_config(&config, Duration::from_secs(10))?;
    let model: ModelVersion = "gpt-6-luna@medium".parse()?;
    let bank: serde_json::Value = serde_json::from_slice(&std::fs::read(BANK)?)?;
    let bank_policy = Policy::of_taxonomy(Taxonomy::parse(&std::fs::read(BANK)?)?);
    let desks = [
        (
            "5 (policy-v1)",
            Policy::load("policy-v1").ok_or("policy-v1")?,
        ),
        ("77 (bank)", bank_policy),
        ("300", of_size(&bank, 300)),
    ];
    let tickets = [
        (
            "Card not here",
            "I ordered a new card two weeks ago and it has still not arrived.",
        ),
        (
            "Transfer",
            "My transfer to my landlord is pending since Monday, when will it arrive?",
        ),
    ];
    println!(
        "  {:<15} {:>7} {:>10} {:>10} {:>8} {:>11} {:>11} {:>7}",
        "departments",
        "prompt B",
        "input 1st",
        "input 2nd",
        "cached",
        "$ 1st call",
        "$ 2nd call",
        "x of 5"
    );
    let mut baseline = None;
    for (name, policy) in &desks {
        let prompt = Prompt::load("triage-v6", policy).ok_or("triage-v6")?;
        let mut figures = Vec::new();
        for (subject, message) in tickets {
            let request = EvaluationRequest {
                subject,
                message,
                prompt: &prompt,
                model: &model,
                policy,
                timeout: Duration::from_secs(10),
                tier: Tier::Online,
            };
            let reply = provider.evaluate(request).await?;
            let cost = config.prices.cost(model.model(), reply.usage, Tier::Online);
            figures.push((reply.usage, cost));
        }
        let ((first, first_usd), (second, second_usd)) = (figures[0], figures[1]);
        let base = *baseline.get_or_insert(second_usd);
        println!(
            "  {:<15} {:>7} {:>10} {:>10} {:>8} {:>11.6} {:>11.6} {:>7.2}",
            name,
            prompt.text.len(),
            first.input_tokens,
            second.input_tokens,
            second.cached_input_tokens,
            first_usd,
            second_usd,
            second_usd / base
        );
    }
    Ok(())
}
