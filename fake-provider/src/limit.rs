//! A provider's request limit: a token bucket refilled at the per-minute rate, holding about
//! one second's share, as real providers enforce per-minute limits over shorter windows. A
//! request that finds it empty gets a 429 with `Retry-After`; unless withheld, every request
//! gets OpenAI's `x-ratelimit-*-requests` headers.

use std::time::{Duration, Instant};

use crate::LimitHeaders;

#[derive(Debug)]
pub(crate) struct Bucket {
    per_minute: u32,
    headers: LimitHeaders,
    capacity: f64,
    tokens: f64,
    refilled: Instant,
}

/// What the bucket said about one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    /// `Some`: refused, retry after this long.
    pub refused: Option<Duration>,
    pub headers: Vec<(&'static str, String)>,
}

impl Bucket {
    pub fn new(per_minute: u32, headers: LimitHeaders, now: Instant) -> Self {
        let capacity = (f64::from(per_minute) / 60.0).max(1.0);
        Self {
            per_minute,
            headers,
            capacity,
            tokens: capacity,
            refilled: now,
        }
    }

    fn per_second(&self) -> f64 {
        f64::from(self.per_minute) / 60.0
    }

    pub fn take(&mut self, now: Instant) -> Verdict {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second()).min(self.capacity);
        self.refilled = now;
        let admitted = self.tokens >= 1.0;
        if admitted {
            self.tokens -= 1.0;
        }
        // Until one whole request is back in the bucket.
        let reset = Duration::from_secs_f64((1.0 - self.tokens).max(0.0) / self.per_second());
        if self.headers == LimitHeaders::Withheld {
            return Verdict {
                refused: (!admitted).then_some(reset),
                headers: Vec::new(),
            };
        }
        Verdict {
            refused: (!admitted).then_some(reset),
            headers: vec![
                ("x-ratelimit-limit-requests", self.per_minute.to_string()),
                (
                    "x-ratelimit-remaining-requests",
                    (self.tokens.floor() as u64).to_string(),
                ),
                (
                    "x-ratelimit-reset-requests",
                    format!("{}ms", reset.as_millis()),
                ),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_admits_one_seconds_share_then_refuses_until_it_refills() {
        let start = Instant::now();
        let mut bucket = Bucket::new(600, LimitHeaders::Sent, start);
        let admitted = (0..20)
            .filter(|_| bucket.take(start).refused.is_none())
            .count();
        assert_eq!(admitted, 10, "600/min holds 10 at once");
        let refused = bucket.take(start);
        assert_eq!(refused.refused, Some(Duration::from_millis(100)));
        assert_eq!(
            refused.headers[1],
            ("x-ratelimit-remaining-requests", "0".into())
        );
        assert!(bucket
            .take(start + Duration::from_millis(100))
            .refused
            .is_none());
    }

    #[test]
    fn withheld_headers_leave_only_retry_after() {
        let start = Instant::now();
        let mut bucket = Bucket::new(60, LimitHeaders::Withheld, start);
        assert_eq!(bucket.take(start).headers, []);
        assert_eq!(bucket.take(start).refused, Some(Duration::from_secs(1)));
    }
}
