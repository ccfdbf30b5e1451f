-- The running totals' and the report counts' trigger work, cheaper (issue 22, the worker's
-- C/L). Their statements lived in LANGUAGE sql functions, which a trigger's PERFORM does not
-- inline: PostgreSQL parsed and planned them on every call, where PL/pgSQL keeps its plans for
-- the session. At C = 32 (`scripts/bench worker`) that parsing and planning was a third of the
-- database's CPU, and the database the bench's bottleneck (docs/ledger.md).

-- The ledger's trigger moves its hour's totals in one statement: old row out and new row in
-- are summed by their totals' row first, so a call's finish (same hour, provider, workload,
-- prompt version, lane and tier) is one upsert of the difference, not two upserts of one row.
-- This is the one place the totals' columns are listed; `provider_call_hour_apply` goes.
CREATE OR REPLACE FUNCTION provider_call_hour_add() RETURNS trigger
LANGUAGE plpgsql AS $$
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
    INSERT INTO provider_call_hour AS h
        (hour, provider, workload, prompt_version, lane, tier, shard, calls, ok, failed, billed,
         billing_unknown, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
         cost_usd, ok_billed, ok_billed_cost_usd)
    SELECT date_trunc('hour', c.started_at, 'UTC'), c.provider, c.workload, c.prompt_version,
           c.lane, c.tier, pg_backend_pid() % 16,
           sum(c.sign),
           sum(c.sign * (c.outcome = 'ok')::int),
           sum(c.sign * (c.outcome NOT IN ('ok', 'in_flight'))::int),
           sum(c.sign * (c.billed IS TRUE)::int),
           sum(c.sign * (c.billed IS NULL)::int),
           sum(c.sign * coalesce(c.input_tokens, 0)),
           sum(c.sign * coalesce(c.output_tokens, 0)),
           sum(c.sign * c.cached_input_tokens),
           sum(c.sign * c.cache_write_tokens),
           sum(c.sign * coalesce(c.cost_usd, 0)),
           sum(c.sign * (c.outcome = 'ok' AND c.billed IS TRUE)::int),
           sum(c.sign * CASE WHEN c.outcome = 'ok' AND c.billed IS TRUE
                             THEN coalesce(c.cost_usd, 0) ELSE 0 END)
    FROM (SELECT OLD.*, -1 AS sign WHERE TG_OP <> 'INSERT'
          UNION ALL
          SELECT NEW.*, 1 AS sign WHERE TG_OP <> 'DELETE') c
    GROUP BY 1, 2, 3, 4, 5, 6
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
    RETURN NULL;
END
$$;
DROP FUNCTION provider_call_hour_apply(provider_call, int);

-- Unchanged but for the language, and the zero delta (most completions' 'dedup') skipped
-- before any statement runs.
CREATE OR REPLACE FUNCTION report_count_add(counted text, delta bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF delta <> 0 THEN
        INSERT INTO report_count AS c (what, shard, n)
        VALUES (counted, pg_backend_pid() % 8, delta)
        ON CONFLICT (what, shard) DO UPDATE SET n = c.n + excluded.n;
    END IF;
END
$$;
