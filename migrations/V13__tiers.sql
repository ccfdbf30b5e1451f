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

-- Cost per task by prompt version, lane and tier (`triage stats`, the console) is read from
-- the ledger's running totals (V9), like every other report: the totals gain those three as
-- part of their key, and the cached-token counts. Rebuilt once from the ledger.
ALTER TABLE provider_call_hour
    ADD COLUMN prompt_version text NOT NULL DEFAULT '',
    ADD COLUMN lane text NOT NULL DEFAULT 'interactive',
    ADD COLUMN tier text NOT NULL DEFAULT 'online',
    ADD COLUMN cached_input_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0,
    DROP CONSTRAINT provider_call_hour_pkey,
    ADD PRIMARY KEY (hour, provider, workload, prompt_version, lane, tier);

CREATE OR REPLACE FUNCTION provider_call_hour_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- An update moves the totals by new minus old: the old row is taken out first.
    IF TG_OP = 'UPDATE' THEN
        IF (OLD.started_at, OLD.provider, OLD.workload, OLD.outcome, OLD.billed,
            OLD.input_tokens, OLD.output_tokens, OLD.cost_usd, OLD.prompt_version, OLD.lane,
            OLD.tier, OLD.cached_input_tokens, OLD.cache_write_tokens)
           IS NOT DISTINCT FROM
           (NEW.started_at, NEW.provider, NEW.workload, NEW.outcome, NEW.billed,
            NEW.input_tokens, NEW.output_tokens, NEW.cost_usd, NEW.prompt_version, NEW.lane,
            NEW.tier, NEW.cached_input_tokens, NEW.cache_write_tokens) THEN
            RETURN NULL;
        END IF;
        PERFORM provider_call_hour_apply(OLD, -1);
    END IF;
    PERFORM provider_call_hour_apply(NEW, 1);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION provider_call_hour_apply(c provider_call, sign int) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO provider_call_hour AS h
        (hour, provider, workload, prompt_version, lane, tier, calls, ok, failed, billed,
         billing_unknown, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
         cost_usd, ok_billed, ok_billed_cost_usd)
    VALUES (date_trunc('hour', c.started_at, 'UTC'), c.provider, c.workload, c.prompt_version,
            c.lane, c.tier,
            sign,
            sign * (c.outcome = 'ok')::int,
            sign * (c.outcome NOT IN ('ok', 'in_flight'))::int,
            sign * (c.billed IS TRUE)::int,
            sign * (c.billed IS NULL)::int,
            sign * coalesce(c.input_tokens, 0),
            sign * coalesce(c.output_tokens, 0),
            sign * c.cached_input_tokens,
            sign * c.cache_write_tokens,
            sign * coalesce(c.cost_usd, 0),
            sign * (c.outcome = 'ok' AND c.billed IS TRUE)::int,
            sign * CASE WHEN c.outcome = 'ok' AND c.billed IS TRUE THEN coalesce(c.cost_usd, 0) ELSE 0 END)
    ON CONFLICT (hour, provider, workload, prompt_version, lane, tier) DO UPDATE SET
        calls = h.calls + excluded.calls,
        ok = h.ok + excluded.ok,
        failed = h.failed + excluded.failed,
        billed = h.billed + excluded.billed,
        billing_unknown = h.billing_unknown + excluded.billing_unknown,
        input_tokens = h.input_tokens + excluded.input_tokens,
        output_tokens = h.output_tokens + excluded.output_tokens,
        cached_input_tokens = h.cached_input_tokens + excluded.cached_input_tokens,
        cache_write_tokens = h.cache_write_tokens + excluded.cache_write_tokens,
        cost_usd = h.cost_usd + excluded.cost_usd,
        ok_billed = h.ok_billed + excluded.ok_billed,
        ok_billed_cost_usd = h.ok_billed_cost_usd + excluded.ok_billed_cost_usd
$$;

TRUNCATE provider_call_hour;
INSERT INTO provider_call_hour
    (hour, provider, workload, prompt_version, lane, tier, calls, ok, failed, billed,
     billing_unknown, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
     cost_usd, ok_billed, ok_billed_cost_usd)
SELECT date_trunc('hour', started_at, 'UTC'), provider, workload, prompt_version, lane, tier,
       count(*),
       count(*) FILTER (WHERE outcome = 'ok'),
       count(*) FILTER (WHERE outcome NOT IN ('ok', 'in_flight')),
       count(*) FILTER (WHERE billed),
       count(*) FILTER (WHERE billed IS NULL),
       coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
       coalesce(sum(cached_input_tokens), 0), coalesce(sum(cache_write_tokens), 0),
       coalesce(sum(cost_usd), 0),
       count(*) FILTER (WHERE outcome = 'ok' AND billed),
       coalesce(sum(cost_usd) FILTER (WHERE outcome = 'ok' AND billed), 0)
FROM provider_call
GROUP BY 1, 2, 3, 4, 5, 6;
