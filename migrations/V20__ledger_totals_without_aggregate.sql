-- The ledger's running totals, cheaper again (issue 22, the worker's C/L). V18's trigger summed
-- the old and new rows with a GROUP BY over a UNION ALL: one statement, but an aggregate, an
-- append and a subquery for the executor to set up on every call, a third of the trigger's
-- cost. The difference is now computed in the VALUES row itself (a row that is absent, OLD
-- on insert or NEW on delete, adds nothing), one upsert per totals row touched. A call's
-- finish stays in its totals row; a change of hour, provider, workload, prompt version, lane
-- or tier (which the pipeline never makes) is two upserts: the old share out, the new in.
-- At C = 32 (`scripts/bench worker`) this took 7% off the machine's CPU (docs/benchmarks.md).
-- This is still the one place the totals' columns are listed.

CREATE OR REPLACE FUNCTION provider_call_hour_add() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    leaving provider_call;
    entering provider_call;
    key provider_call;
    moves int := 1;
BEGIN
    -- Retention of the DEFAULT partition's old rows keeps the money (V14).
    IF TG_OP = 'DELETE' AND current_setting('triage.ledger_retention', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND
       (OLD.started_at, OLD.provider, OLD.workload, OLD.outcome, OLD.billed,
        OLD.input_tokens, OLD.output_tokens, OLD.cost_usd, OLD.prompt_version, OLD.lane,
        OLD.tier, OLD.cached_input_tokens, OLD.cache_write_tokens)
       IS NOT DISTINCT FROM
       (NEW.started_at, NEW.provider, NEW.workload, NEW.outcome, NEW.billed,
        NEW.input_tokens, NEW.output_tokens, NEW.cost_usd, NEW.prompt_version, NEW.lane,
        NEW.tier, NEW.cached_input_tokens, NEW.cache_write_tokens) THEN
        RETURN NULL;
    END IF;
    -- The share that leaves its totals row and the share that enters one.
    IF TG_OP <> 'INSERT' THEN leaving := OLD; END IF;
    IF TG_OP <> 'DELETE' THEN entering := NEW; END IF;
    IF TG_OP = 'UPDATE' AND
       (date_trunc('hour', OLD.started_at, 'UTC'), OLD.provider, OLD.workload, OLD.prompt_version, OLD.lane, OLD.tier)
       IS DISTINCT FROM
       (date_trunc('hour', NEW.started_at, 'UTC'), NEW.provider, NEW.workload, NEW.prompt_version, NEW.lane, NEW.tier) THEN
        moves := 2;  -- OLD's share out first, then NEW's in
        entering := NULL;
    END IF;
    FOR pass IN 1..moves LOOP
        IF pass = 2 THEN
            leaving := NULL;
            entering := NEW;
        END IF;
        -- `id` is never NULL in a row that is there.
        IF entering.id IS NULL THEN key := leaving; ELSE key := entering; END IF;
        INSERT INTO provider_call_hour AS h
            (hour, provider, workload, prompt_version, lane, tier, shard, calls, ok, failed, billed,
             billing_unknown, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
             cost_usd, ok_billed, ok_billed_cost_usd)
        VALUES (date_trunc('hour', key.started_at, 'UTC'), key.provider, key.workload,
                key.prompt_version, key.lane, key.tier, pg_backend_pid() % 16,
                (entering.id IS NOT NULL)::int - (leaving.id IS NOT NULL)::int,
                coalesce((entering.outcome = 'ok')::int, 0) - coalesce((leaving.outcome = 'ok')::int, 0),
                coalesce((entering.outcome NOT IN ('ok', 'in_flight'))::int, 0)
                    - coalesce((leaving.outcome NOT IN ('ok', 'in_flight'))::int, 0),
                coalesce((entering.billed IS TRUE)::int, 0) - coalesce((leaving.billed IS TRUE)::int, 0),
                (entering.id IS NOT NULL AND entering.billed IS NULL)::int
                    - (leaving.id IS NOT NULL AND leaving.billed IS NULL)::int,
                coalesce(entering.input_tokens, 0) - coalesce(leaving.input_tokens, 0),
                coalesce(entering.output_tokens, 0) - coalesce(leaving.output_tokens, 0),
                coalesce(entering.cached_input_tokens, 0) - coalesce(leaving.cached_input_tokens, 0),
                coalesce(entering.cache_write_tokens, 0) - coalesce(leaving.cache_write_tokens, 0),
                coalesce(entering.cost_usd, 0) - coalesce(leaving.cost_usd, 0),
                coalesce((entering.outcome = 'ok' AND entering.billed IS TRUE)::int, 0)
                    - coalesce((leaving.outcome = 'ok' AND leaving.billed IS TRUE)::int, 0),
                CASE WHEN entering.outcome = 'ok' AND entering.billed IS TRUE THEN coalesce(entering.cost_usd, 0) ELSE 0 END
                    - CASE WHEN leaving.outcome = 'ok' AND leaving.billed IS TRUE THEN coalesce(leaving.cost_usd, 0) ELSE 0 END)
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
            ok_billed_cost_usd = h.ok_billed_cost_usd + excluded.ok_billed_cost_usd;
    END LOOP;
    RETURN NULL;
END
$$;
