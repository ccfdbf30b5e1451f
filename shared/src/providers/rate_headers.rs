//! What a provider says about its rate limit in its response headers: OpenAI's
//! `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (resets as `1m30.5s`, `20ms`) and
//! Anthropic's `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (resets as
//! RFC 3339 times). The worker's shared limiter (`pipeline::limits::rate_limit`) acts on them.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;

/// The rate-limit headers of one response; all empty when the provider sent none.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateSignals {
    /// A budget (requests or tokens) has nothing left; it refills after this long.
    pub exhausted_for: Option<Duration>,
    /// The longest reset announced, whatever is left: how long a 429 without `Retry-After`
    /// is to be honoured.
    pub longest_reset: Option<Duration>,
    /// The provider's own per-minute limits.
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
}

/// One budget's three headers, in both providers' spellings.
struct Budget {
    limit: Option<u32>,
    remaining: Option<u64>,
    reset: Option<Duration>,
}

pub fn read(headers: &HeaderMap, now: SystemTime) -> RateSignals {
    let requests = budget(headers, "requests", now);
    let tokens = budget(headers, "tokens", now);
    let longest = |durations: [Option<Duration>; 2]| durations.into_iter().flatten().max();
    let exhausted = |b: &Budget| b.reset.filter(|_| b.remaining == Some(0));
    RateSignals {
        exhausted_for: longest([exhausted(&requests), exhausted(&tokens)]),
        longest_reset: longest([requests.reset, tokens.reset]),
        requests_per_minute: requests.limit,
        tokens_per_minute: tokens.limit,
    }
}

fn budget(headers: &HeaderMap, what: &str, now: SystemTime) -> Budget {
    let header = |field: &str| {
        [
            format!("x-ratelimit-{field}-{what}"),
            format!("anthropic-ratelimit-{what}-{field}"),
        ]
        .into_iter()
        .find_map(|name| Some(headers.get(name)?.to_str().ok()?.trim().to_owned()))
    };
    Budget {
        limit: header("limit").and_then(|v| v.parse().ok()),
        remaining: header("remaining").and_then(|v| v.parse().ok()),
        reset: header("reset").and_then(|v| reset_after(&v, now)),
    }
}

/// A reset as OpenAI's duration (`6m0s`, `1.5s`, `20ms`) or Anthropic's RFC 3339 instant.
fn reset_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(at) = DateTime::parse_from_rfc3339(value) {
        let now: DateTime<Utc> = now.into();
        return Some((at.with_timezone(&Utc) - now).to_std().unwrap_or_default());
    }
    go_duration(value)
}

/// `1h2m3.5s`, `20ms`: numbers each followed by a unit.
fn go_duration(value: &str) -> Option<Duration> {
    let mut total = 0.0;
    let mut rest = value;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..digits].parse().ok()?;
        let after = &rest[digits..];
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let unit = match &after[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        total += number * unit;
        rest = &after[unit_len..];
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderName, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn openai_durations_read_like_go_durations() {
        let secs = |v| go_duration(v).map(|d| d.as_secs_f64());
        assert_eq!(secs("1s"), Some(1.0));
        assert_eq!(secs("6m0s"), Some(360.0));
        assert_eq!(secs("1m30.5s"), Some(90.5));
        assert_eq!(secs("20ms"), Some(0.02));
        assert_eq!(secs("1h"), Some(3600.0));
        assert_eq!(secs("soon"), None);
        assert_eq!(secs("5"), None, "a unit is required");
    }

    #[test]
    fn openai_headers_give_limits_and_the_reset_of_an_exhausted_budget() {
        let signals = read(
            &headers(&[
                ("x-ratelimit-limit-requests", "500"),
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "1.5s"),
                ("x-ratelimit-limit-tokens", "90000"),
                ("x-ratelimit-remaining-tokens", "4000"),
                ("x-ratelimit-reset-tokens", "6m0s"),
            ]),
            SystemTime::now(),
        );
        assert_eq!(
            signals,
            RateSignals {
                exhausted_for: Some(Duration::from_millis(1500)),
                longest_reset: Some(Duration::from_secs(360)),
                requests_per_minute: Some(500),
                tokens_per_minute: Some(90_000),
            }
        );
    }

    #[test]
    fn anthropic_resets_are_instants_relative_to_now() {
        let now: SystemTime = "2026-01-01T00:00:00Z"
            .parse::<DateTime<Utc>>()
            .unwrap()
            .into();
        let signals = read(
            &headers(&[
                ("anthropic-ratelimit-tokens-limit", "40000"),
                ("anthropic-ratelimit-tokens-remaining", "0"),
                ("anthropic-ratelimit-tokens-reset", "2026-01-01T00:00:07Z"),
                ("anthropic-ratelimit-requests-reset", "2025-12-31T23:59:00Z"),
            ]),
            now,
        );
        assert_eq!(signals.exhausted_for, Some(Duration::from_secs(7)));
        assert_eq!(signals.tokens_per_minute, Some(40_000));
        assert_eq!(signals.requests_per_minute, None);
    }

    #[test]
    fn no_headers_say_nothing() {
        assert_eq!(
            read(&HeaderMap::new(), SystemTime::now()),
            RateSignals::default()
        );
    }
}
