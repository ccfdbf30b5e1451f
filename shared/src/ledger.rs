//! The attempt ledger: one row per provider call, inserted *before* the call and completed
//! after it. A crash in between leaves an `in_flight` row: "outcome unknown, possibly billed".
//! Billed calls per key and spend are read from here. Every call writes twice, so both
//! statements are prepared once per connection (deadpool's statement cache).

use std::{collections::HashMap, time::Duration};

use deadpool_postgres::GenericClient;

use crate::{
    error::{ConfigError, Result},
    evaluate::Usage,
    outbox::ClaimedJob,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallId(pub i64);

/// USD per million input and output tokens, by model name (the part before `@`).
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable(HashMap<String, (f64, f64)>);

impl Default for PriceTable {
    fn default() -> Self {
        Self(HashMap::from([("gpt-6-luna".to_string(), (1.25, 10.0))]))
    }
}

impl PriceTable {
    /// `TRIAGE_PRICES`: `model=input/output,...`, USD per million tokens.
    pub fn parse(spec: &str) -> Result<Self, ConfigError> {
        let mut table = HashMap::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let parsed = entry.split_once('=').and_then(|(model, prices)| {
                let (input, output) = prices.split_once('/')?;
                Some((
                    model.trim().to_string(),
                    (input.trim().parse().ok()?, output.trim().parse().ok()?),
                ))
            });
            let (model, prices) = parsed.ok_or_else(|| {
                ConfigError::invalid(
                    "TRIAGE_PRICES",
                    format!("{entry:?} is not model=input/output"),
                )
            })?;
            table.insert(model, prices);
        }
        Ok(Self(table))
    }

    /// Cost of one call; unknown models cost 0 (and say so in the ledger by a NULL-free 0).
    pub fn cost(&self, model: &str, usage: Usage) -> f64 {
        let (input, output) = self.0.get(model).copied().unwrap_or((0.0, 0.0));
        (usage.input_tokens as f64 * input + usage.output_tokens as f64 * output) / 1_000_000.0
    }
}

/// How a recorded call ended.
#[derive(Debug, Clone)]
pub struct CallRecord<'a> {
    /// `ok`, `contract_violation`, or the failure reason.
    pub outcome: &'a str,
    pub error_class: Option<&'a str>,
    pub http_status: Option<u16>,
    /// `None` when nobody can know (a timeout the provider may have served).
    pub billed: Option<bool>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub latency: Duration,
}

/// Records the call about to be made, unless a result for the job's key exists (article step
/// 4, the line that saves money): `None` then, and no call is to be made. One statement, so
/// the dedup check costs no round trip of its own.
pub async fn start_call_unless_evaluated(
    client: &impl GenericClient,
    job: &ClaimedJob,
    worker: &str,
    provider: &str,
) -> Result<Option<CallId>> {
    let statement = client
        .prepare_cached(
            r#"
            INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, model_version, prompt_version)
            SELECT $1, $2, $3, $4, $5, $6, $7
            WHERE NOT EXISTS (SELECT 1 FROM evaluation_result WHERE idempotency_key = $2)
            RETURNING id
            "#,
        )
        .await?;
    let row = client
        .query_opt(
            &statement,
            &[
                &job.id.0,
                &job.key.as_str(),
                &job.attempts,
                &worker,
                &provider,
                &job.model_version,
                &job.prompt_version,
            ],
        )
        .await?;
    Ok(row.map(|row| CallId(row.get(0))))
}

pub async fn finish_call(
    client: &impl GenericClient,
    call: CallId,
    record: &CallRecord<'_>,
) -> Result<()> {
    let statement = client
        .prepare_cached(
            r#"
            UPDATE provider_call
            SET finished_at = now(), outcome = $2, error_class = $3, http_status = $4, billed = $5,
                input_tokens = $6, output_tokens = $7, cost_usd = $8::float8::numeric, latency_ms = $9
            WHERE id = $1
            "#,
        )
        .await?;
    client
        .execute(
            &statement,
            &[
                &call.0,
                &record.outcome,
                &record.error_class,
                &record.http_status.map(i32::from),
                &record.billed,
                &record.usage.input_tokens,
                &record.usage.output_tokens,
                &record.cost_usd,
                &(record.latency.as_millis().min(i32::MAX as u128) as i32),
            ],
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_parse_and_cost_per_million_tokens() {
        let table = PriceTable::parse("gpt-6-luna=2/8, mini=0.5/1").unwrap();
        let usage = Usage {
            input_tokens: 1_000,
            output_tokens: 500,
        };
        assert!((table.cost("gpt-6-luna", usage) - 0.006).abs() < 1e-12);
        assert_eq!(table.cost("unknown", usage), 0.0);
        assert!(PriceTable::parse("gpt=1").is_err());
    }
}
