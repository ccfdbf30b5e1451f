//! How the fake answers one call: [`Behavior`], and the flex tier's and a request limit's
//! settings.

use std::time::Duration;

use serde_json::Value;

use crate::Gate;

/// Whether a request limit announces itself in headers, or only refuses with `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHeaders {
    Sent,
    Withheld,
}

/// How the fake answers one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Behavior {
    /// A valid answer derived from the ticket text, see [`classify`].
    #[default]
    Classify,
    /// This exact object as the model's output.
    Answer(Value),
    /// Waits, then behaves like the inner behaviour.
    Delay(Duration, Box<Behavior>),
    /// Waits at the gate until the test releases it (see [`Gate`]), then behaves like the
    /// inner behaviour. Batch lines are not held.
    Held(Gate, Box<Behavior>),
    /// 429 with a `Retry-After` header when given.
    RateLimited { retry_after: Option<Duration> },
    /// OpenAI flex's 429 "resource unavailable": no capacity at the flex tier right now.
    ResourceUnavailable,
    /// The account is out of money: OpenAI's 429 `insufficient_quota`, Anthropic's 402
    /// `billing_error`.
    QuotaExhausted,
    /// This status (500 when it is not a valid one) with the provider's server-error body.
    Status(u16),
    /// OpenAI's 503 / Anthropic's 529 "overloaded", with a `Retry-After` header when given.
    Overloaded { retry_after: Option<Duration> },
    /// 401.
    Unauthorized,
    /// 404, unknown model.
    ModelNotFound,
    /// 400, the prompt exceeds the context window.
    ContextLength,
    /// 400, the request was rejected by the provider's safety system.
    ContentPolicy,
    /// 400, anything else wrong with the request.
    InvalidRequest,
    /// 400 naming a request parameter (`response_format`, `reasoning_effort`, `tools`...), as
    /// the APIs refuse a shape they do not support; `message` is the API's text.
    RejectParameter { param: String, message: String },
    /// Drops the TCP connection with a RST, without sending a response.
    ResetConnection,
    /// Never answers; the connection stays open until the client gives up.
    Hang,
    /// 200 with a body that is not valid JSON.
    MalformedJson,
    /// 200, the model's answer is prose instead of JSON.
    NotJsonContent,
    /// 200, the model declined (OpenAI `refusal`, Anthropic `stop_reason: refusal`).
    Refusal,
    /// 200, OpenAI `finish_reason: content_filter`. Anthropic has no separate filter
    /// signal, so it answers like [`Behavior::Refusal`].
    ContentFilter,
    /// 200, the answer was cut at the token limit (`length` / `max_tokens`).
    Truncated,
    /// 200 with a well-formed answer outside the contract (department `"legal"`).
    OutOfContract,
}

impl Behavior {
    /// `self`, answered after `delay`.
    pub fn after(self, delay: Duration) -> Behavior {
        Behavior::Delay(delay, Box::new(self))
    }

    /// `self`, answered when `gate` is released (see [`Gate`]).
    pub fn held(self, gate: &Gate) -> Behavior {
        Behavior::Held(gate.clone(), Box::new(self))
    }

    /// The total delay and the behaviour it leads to (its gates passed over).
    pub(crate) fn split_delay(self) -> (Duration, Behavior) {
        let (delay, _, behavior) = self.split();
        (delay, behavior)
    }

    /// The total delay, the gates to pass, and the behaviour they lead to.
    pub(crate) fn split(self) -> (Duration, Vec<Gate>, Behavior) {
        match self {
            Behavior::Delay(delay, inner) => {
                let (more, gates, inner) = inner.split();
                (delay + more, gates, inner)
            }
            Behavior::Held(gate, inner) => {
                let (delay, mut gates, inner) = inner.split();
                gates.insert(0, gate);
                (delay, gates, inner)
            }
            other => (Duration::ZERO, Vec::new(), other),
        }
    }
}

/// How the flex tier behaves ([`FakeProvider::set_flex`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flex {
    /// Added to every flex call's answer.
    pub delay: Duration,
    /// Every n-th flex call gets a 429 "resource unavailable"; 0, never.
    pub unavailable_every: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_delays_add_up_to_the_inner_behavior() {
        let behavior = Behavior::Refusal
            .after(Duration::from_millis(5))
            .after(Duration::from_millis(7));
        assert_eq!(
            behavior.split_delay(),
            (Duration::from_millis(12), Behavior::Refusal)
        );
    }
}
