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

-- The batch tier: a submission is recorded (state 'sending', its reference) *before* it is
-- sent, and its provider batch id once the provider has answered. The reference travels
-- with the batch (OpenAI: metadata and file name; Anthropic: every custom_id), so a worker
-- that died in between leaves a 'sending' row the next tick adopts instead of sending twice.
-- polled_until is a lease on the submission: one worker collects it at a time.
CREATE TABLE batch_submission (
    id                bigserial PRIMARY KEY,
    reference         text NOT NULL UNIQUE DEFAULT ('triage-' || replace(gen_random_uuid()::text, '-', '')),
    provider          text NOT NULL,
    worker            text NOT NULL,
    lines             int NOT NULL,
    state             text NOT NULL DEFAULT 'sending'
                      CHECK (state IN ('sending', 'submitted', 'collected', 'abandoned')),
    provider_batch_id text UNIQUE,
    polled_until      timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    submitted_at      timestamptz,
    finished_at       timestamptz
);
CREATE INDEX idx_batch_submission_open ON batch_submission (created_at) WHERE state IN ('sending', 'submitted');

-- A job in a batch stays 'processing' under a lease longer than the batch's 24-hour window,
-- fenced by its claim token like any claim, and names its submission. A line that failed,
-- expired or was cancelled goes back to the queue for the online path only (online_only).
ALTER TABLE evaluation_outbox
    ADD COLUMN batch_submission_id bigint REFERENCES batch_submission (id),
    ADD COLUMN online_only boolean NOT NULL DEFAULT false;
CREATE INDEX idx_outbox_batch_submission ON evaluation_outbox (batch_submission_id) WHERE batch_submission_id IS NOT NULL;
