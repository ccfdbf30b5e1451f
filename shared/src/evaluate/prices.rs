//! What a call costs: USD per million input and output tokens, by model name (`TRIAGE_PRICES`).

use std::collections::HashMap;

use super::Usage;
use crate::domain::error::ConfigError;

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

    /// Whether `model` has a price: with a daily budget, an unpriced model would be spent
    /// without being counted.
    pub fn knows(&self, model: &str) -> bool {
        self.0.contains_key(model)
    }

    /// Cost of one call; unknown models cost 0 (and say so in the ledger by a NULL-free 0).
    pub fn cost(&self, model: &str, usage: Usage) -> f64 {
        let (input, output) = self.0.get(model).copied().unwrap_or((0.0, 0.0));
        (usage.input_tokens as f64 * input + usage.output_tokens as f64 * output) / 1_000_000.0
    }
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
        assert!(table.knows("mini") && !table.knows("unknown"));
        assert!(PriceTable::parse("gpt=1").is_err());
    }
}
