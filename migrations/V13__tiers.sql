-- Lanes and tiers (issue 19; docs/cost.md).
--
-- The claim asks each lane in turn (interactive first), so pending rows are indexed by lane:
-- a bulk backlog of thousands never sits in front of the interactive lane's index scan.
CREATE INDEX idx_outbox_claimable_lane ON evaluation_outbox (lane, available_at) WHERE status = 'pending';

-- Every call says how it was served and what of its input the provider's prompt cache held,
-- so its cost can be recomputed and cost per task read by lane and tier.
-- tier: 'online' (the standard synchronous price), 'flex' (OpenAI's flex tier), 'batch'.
-- cached_input_tokens: input read from the cache (part of input_tokens).
-- cache_write_tokens: input written to the cache (Anthropic; part of input_tokens).
-- Constant defaults: metadata-only additions, a running fleet is not blocked.
ALTER TABLE provider_call
    ADD COLUMN tier text NOT NULL DEFAULT 'online' CHECK (tier IN ('online', 'flex', 'batch')),
    ADD COLUMN cached_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0;
