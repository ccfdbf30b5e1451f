//! What a call costs: USD per million input, cached input and output tokens, by model name,
//! and the discount of the cheaper tiers (`TRIAGE_PRICES`). Pure: the cost is a function of
//! the usage the provider reported and the tier the call ran on.

use std::collections::HashMap;

use super::Usage;
use crate::domain::error::ConfigError;

/// How a call was served. The tier decides the price, not the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Tier {
    /// The synchronous endpoint at the standard price (today's behaviour).
    #[default]
    Online,
    /// OpenAI's `service_tier: "flex"`: the synchronous endpoint, slower and sometimes
    /// "resource unavailable", at the batch price.
    Flex,
    /// OpenAI's Batch API or Anthropic's Message Batches: answered within 24 hours.
    Batch,
}

impl Tier {
    /// The tier as stored in the attempt ledger and shown in reports.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Online => "online",
            Tier::Flex => "flex",
            Tier::Batch => "batch",
        }
    }
}

/// USD per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrices {
    pub input: f64,
    /// Input read from the provider's prompt cache (OpenAI `cached_tokens`, Anthropic
    /// `cache_read_input_tokens`). The two-price form prices it as plain input.
    pub cached_input: f64,
    pub output: f64,
}

/// Anthropic bills writing a prefix into its (5-minute) cache at 1.25 times the input price.
pub const CACHE_WRITE_FACTOR: f64 = 1.25;

/// What both providers charge for batch (and OpenAI for flex) work: half the online price.
pub const DEFAULT_BATCH_FACTOR: f64 = 0.5;

/// Prices by model name (the part before `@`), and the factor batch and flex calls pay.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    models: HashMap<String, ModelPrices>,
    batch_factor: f64,
}

impl Default for PriceTable {
    fn default() -> Self {
        let luna = ModelPrices {
            input: 1.25,
            cached_input: 0.125,
            output: 10.0,
        };
        Self {
            models: HashMap::from([("gpt-6-luna".to_string(), luna)]),
            batch_factor: DEFAULT_BATCH_FACTOR,
        }
    }
}

impl PriceTable {
    /// `TRIAGE_PRICES`: `model=input/output` or `model=input/cached_input/output`, USD per
    /// million tokens, and optionally `batch=FACTOR` (what batch and flex calls pay of the
    /// online price, default 0.5), comma-separated.
    pub fn parse(spec: &str) -> Result<Self, ConfigError> {
        let mut table = Self {
            models: HashMap::new(),
            batch_factor: DEFAULT_BATCH_FACTOR,
        };
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let invalid =
                |why: &str| ConfigError::invalid("TRIAGE_PRICES", format!("{entry:?} {why}"));
            let (name, prices) = entry
                .split_once('=')
                .ok_or_else(|| invalid("is not model=input/output"))?;
            let numbers = prices
                .split('/')
                .map(|n| {
                    n.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|n| n.is_finite() && *n >= 0.0)
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| invalid("has a price that is not a number of USD"))?;
            match (name.trim(), numbers.as_slice()) {
                ("batch", [factor]) if *factor > 0.0 && *factor <= 1.0 => {
                    table.batch_factor = *factor;
                }
                ("batch", _) => return Err(invalid("must be batch=FACTOR, above 0 and at most 1")),
                (model, [input, output]) => {
                    table.insert(model, *input, *input, *output);
                }
                (model, [input, cached_input, output]) => {
                    table.insert(model, *input, *cached_input, *output);
                }
                _ => {
                    return Err(invalid(
                        "is not model=input/output or model=input/cached_input/output",
                    ))
                }
            }
        }
        Ok(table)
    }

    fn insert(&mut self, model: &str, input: f64, cached_input: f64, output: f64) {
        let prices = ModelPrices {
            input,
            cached_input,
            output,
        };
        self.models.insert(model.to_string(), prices);
    }

    /// Whether `model` has a price: with a daily budget, an unpriced model would be spent
    /// without being counted.
    pub fn knows(&self, model: &str) -> bool {
        self.models.contains_key(model)
    }

    /// What batch and flex calls pay of the online price.
    pub fn batch_factor(&self) -> f64 {
        self.batch_factor
    }

    /// Cost of one call from every kind of token it used; unknown models cost 0.
    pub fn cost(&self, model: &str, usage: Usage, tier: Tier) -> f64 {
        let Some(prices) = self.models.get(model) else {
            return 0.0;
        };
        let plain = usage.uncached_input_tokens() as f64 * prices.input;
        let cached = usage.cached_input_tokens as f64 * prices.cached_input;
        let written = usage.cache_write_tokens as f64 * prices.input * CACHE_WRITE_FACTOR;
        let output = usage.output_tokens as f64 * prices.output;
        let factor = match tier {
            Tier::Online => 1.0,
            Tier::Flex | Tier::Batch => self.batch_factor,
        };
        (plain + cached + written + output) * factor / 1_000_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: i64, cached: i64, written: i64, output: i64) -> Usage {
        Usage {
            input_tokens: input,
            cached_input_tokens: cached,
            cache_write_tokens: written,
            output_tokens: output,
        }
    }

    #[test]
    fn prices_parse_and_cost_per_million_tokens() {
        let table = PriceTable::parse("gpt-6-luna=2/8, mini=0.5/1").unwrap();
        let usage = usage(1_000, 0, 0, 500);
        assert!((table.cost("gpt-6-luna", usage, Tier::Online) - 0.006).abs() < 1e-12);
        assert_eq!(table.cost("unknown", usage, Tier::Online), 0.0);
        assert!(table.knows("mini") && !table.knows("unknown"));
        assert!(PriceTable::parse("gpt=1").is_err());
    }

    #[test]
    fn every_kind_of_token_is_priced_on_every_tier() {
        let table = PriceTable::parse("m=2/0.2/8, batch=0.5").unwrap();
        // (usage: input of which cached and written, output; tier; USD)
        let cases = [
            (usage(1_000_000, 0, 0, 0), Tier::Online, 2.0),
            (usage(1_000_000, 1_000_000, 0, 0), Tier::Online, 0.2),
            (usage(1_000_000, 600_000, 0, 0), Tier::Online, 0.8 + 0.12),
            (usage(1_000_000, 0, 1_000_000, 0), Tier::Online, 2.5),
            (
                usage(1_000_000, 200_000, 300_000, 0),
                Tier::Online,
                1.0 + 0.04 + 0.75,
            ),
            (usage(0, 0, 0, 1_000_000), Tier::Online, 8.0),
            (
                usage(1_000_000, 500_000, 0, 1_000_000),
                Tier::Batch,
                (1.0 + 0.1 + 8.0) / 2.0,
            ),
            (usage(1_000_000, 0, 0, 1_000_000), Tier::Flex, 5.0),
        ];
        for (usage, tier, usd) in cases {
            let cost = table.cost("m", usage, tier);
            assert!(
                (cost - usd).abs() < 1e-9,
                "{usage:?} {tier:?}: {cost} != {usd}"
            );
        }
    }

    #[test]
    fn the_two_price_form_prices_cached_input_as_input_and_batch_defaults_to_half() {
        let table = PriceTable::parse("m=2/8").unwrap();
        let cached = usage(1_000_000, 1_000_000, 0, 0);
        assert!((table.cost("m", cached, Tier::Online) - 2.0).abs() < 1e-9);
        assert_eq!(table.batch_factor(), DEFAULT_BATCH_FACTOR);
        assert!((table.cost("m", cached, Tier::Batch) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn malformed_prices_and_factors_are_refused_by_name() {
        for bad in [
            "m=1/2/3/4",
            "m=a/b",
            "m=-1/2",
            "batch=0",
            "batch=1.5",
            "batch=1/2",
            "m",
        ] {
            let error = PriceTable::parse(bad).unwrap_err();
            assert!(
                error.to_string().contains("TRIAGE_PRICES"),
                "{bad}: {error}"
            );
        }
        assert_eq!(PriceTable::parse("batch=0.4").unwrap().batch_factor(), 0.4);
    }
}
