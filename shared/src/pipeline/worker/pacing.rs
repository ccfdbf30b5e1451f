//! A job's slot in the provider's shared rate limit ([`rate_limit`]): reserved with the call's
//! ledger row (`ledger::start_call`), slept for with no pooled connection held, and settled
//! after it.

use std::time::Instant;

use super::{Worker, WRITE_MARGIN};
use crate::{
    db,
    domain::error::Result,
    pipeline::{
        ledger::Slot,
        limits::rate_limit::{self, Pace, Settlement},
    },
    providers::{Provider, ProviderError, ProviderReply},
};

impl<P: Provider> Worker<P> {
    /// The slot a call of `tokens` takes in the shared rate limit, if any: none for the
    /// offline classifier (no limit to share), nor while no limit is configured or announced
    /// and no 429 was heard. It must open early enough for the call and its write to finish
    /// before `deadline`.
    pub(super) fn slot<'a>(
        &self,
        pace: &'a Pace,
        tokens: i64,
        deadline: Instant,
    ) -> Option<Slot<'a>> {
        if self.config.versions.model.is_rules() || !self.limiter.engaged() {
            return None;
        }
        let needed = self.config.worker.call_timeout + WRITE_MARGIN;
        let max_wait = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(needed);
        Some(Slot {
            pace,
            tokens,
            max_wait,
        })
    }

    /// After a 429: the call's tokens were not spent (given back with its ledger row), and
    /// every worker holds off until the provider's reset; from now on this process's calls take
    /// slots.
    pub(super) fn refusal(&self, tokens: i64, error: &ProviderError) -> Settlement {
        self.limiter.engage();
        Settlement::refused(tokens, error.retry_after)
    }

    /// After flex's "resource unavailable" 429: the provider had no flex capacity, which says
    /// nothing of the account's limit, so nobody else holds off (interactive calls go on); the
    /// call's tokens were not spent.
    pub(super) fn flex_refusal(&self, tokens: i64) -> Settlement {
        Settlement {
            token_correction: -tokens,
            ..Settlement::default()
        }
    }

    /// After an answer: the provider's announced limits are heard (and passed on to the fleet
    /// when new); the token budget is corrected by the usage reported (with the ledger row), and
    /// an empty budget holds every worker off.
    pub(super) fn answer(&self, tokens: i64, reply: &ProviderReply) -> Settlement {
        let used = reply.usage.input_tokens + reply.usage.output_tokens;
        Settlement {
            announced: self.limiter.heard(&reply.rate),
            ..Settlement::answered(tokens, used, &reply.rate)
        }
    }

    /// The token correction of `settlement` in seconds of the shared budget (written by
    /// `ledger::finish_call`, once).
    pub(super) fn token_correction_secs(&self, settlement: &Settlement) -> f64 {
        if !self.limiter.engaged() {
            return 0.0;
        }
        self.limiter
            .pace()
            .token_cost_secs(settlement.token_correction)
    }

    /// The hold of `settlement` and the limits it heard announced, for every worker; no
    /// statement without either.
    pub(super) async fn hold(&self, client: &db::Client, settlement: &Settlement) -> Result<()> {
        let hold = Settlement {
            token_correction: 0,
            ..*settlement
        };
        let pace = self.limiter.pace();
        rate_limit::settle(client, self.provider.name(), &pace, hold).await
    }
}
