-- The ledger's running totals sharded by backend, as the report counts are (V9): every ledger
-- write moved the one row of its hour, provider, workload, prompt version, lane and tier, so
-- concurrent calls queued on that row's lock for the rest of their statement and their commit.
-- At C = 32 on one worker the start and the finish took 2.1 and 2.3 ms each instead of 0.2 and
-- 0.1 without the totals (`scripts/bench worker`: 57% of C/L). Each backend now adds to a shard
-- of its own (its pid modulo 16); every reader already sums the rows it reads. A correction
-- made by another backend than the call's start moves that backend's shard: the sums stay
-- right, a shard's row alone may not.
ALTER TABLE provider_call_hour ADD COLUMN shard int NOT NULL DEFAULT 0;
ALTER TABLE provider_call_hour DROP CONSTRAINT provider_call_hour_pkey,
    ADD PRIMARY KEY (hour, provider, workload, prompt_version, lane, tier, shard);

CREATE OR REPLACE FUNCTION provider_call_hour_apply(c provider_call, sign int) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO provider_call_hour AS h
        (hour, provider, workload, prompt_version, lane, tier, shard, calls, ok, failed, billed,
         billing_unknown, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
         cost_usd, ok_billed, ok_billed_cost_usd)
    VALUES (date_trunc('hour', c.started_at, 'UTC'), c.provider, c.workload, c.prompt_version,
            c.lane, c.tier, pg_backend_pid() % 16,
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
    ON CONFLICT (hour, provider, workload, prompt_version, lane, tier, shard) DO UPDATE SET
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
