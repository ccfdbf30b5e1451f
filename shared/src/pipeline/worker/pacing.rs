//! A job's slot in the provider's shared rate limit ([`rate_limit`]): reserved before the
//! call, slept for with no pooled connection held, and settled after it.

use std::time::Instant;

use super::{Worker, WRITE_MARGIN};
use crate::{
    db,
    domain::error::Result,
    evaluate::{Provider, ProviderError, ProviderReply},
    pipeline::rate_limit::{self, Settlement, Take},
};

impl<P: Provider> Worker<P> {
    /// Reserves a slot for a call of `tokens` that can still finish, with its write, before
    /// `deadline`. The offline classifier has no limit to share.
    pub(super) async fn reserve_call(
        &self,
        client: &db::Client,
        tokens: i64,
        deadline: Instant,
    ) -> Result<Take> {
        if self.config.versions.model.is_rules() {
            return Ok(Take::Reserved {
                wait: Default::default(),
            });
        }
        let needed = self.config.worker.call_timeout + WRITE_MARGIN;
        let max_wait = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(needed);
        let pace = self.limiter.pace();
        rate_limit::take(client, self.provider.name(), &pace, tokens, max_wait).await
    }

    /// After a 429: every worker holds off until the provider's reset; the call's tokens were
    /// not spent.
    pub(super) async fn settle_refusal(
        &self,
        client: &db::Client,
        tokens: i64,
        error: &ProviderError,
    ) -> Result<()> {
        self.settle_rate(client, Settlement::refused(tokens, error.retry_after))
            .await
    }

    /// After flex's "resource unavailable" 429: the provider had no flex capacity, which says
    /// nothing of the account's limit, so nobody else holds off (interactive calls go on); the
    /// call's tokens were not spent.
    pub(super) async fn settle_flex_refusal(&self, client: &db::Client, tokens: i64) -> Result<()> {
        let settlement = Settlement {
            token_correction: -tokens,
            hold: None,
        };
        self.settle_rate(client, settlement).await
    }

    /// After an answer: the provider's announced limits are heard, the token budget is
    /// corrected by the usage reported, and an empty budget holds every worker off.
    pub(super) async fn settle_answer(
        &self,
        client: &db::Client,
        tokens: i64,
        reply: &ProviderReply,
    ) -> Result<()> {
        self.limiter.heard(&reply.rate);
        let used = reply.usage.input_tokens + reply.usage.output_tokens;
        self.settle_rate(client, Settlement::answered(tokens, used, &reply.rate))
            .await
    }

    async fn settle_rate(&self, client: &db::Client, settlement: Settlement) -> Result<()> {
        let pace = self.limiter.pace();
        rate_limit::settle(client, self.provider.name(), &pace, settlement).await
    }
}
