-- The attempt ledger partitioned by day (docs/ledger.md, issue 22), and the provider's announced
-- limits kept for the fleet (at the end): `provider_call` by range of
-- `started_at`, one partition per UTC day created ahead by the sweeper, a DEFAULT partition so
-- a day nobody created ahead never loses a call, and retention that drops a whole day instead
-- of deleting rows. The running totals (`provider_call_hour`) keep the money of dropped days.
--
-- Written against whatever columns the table has by now (LIKE), so it converts an existing
-- ledger: the old table keeps its rows and becomes the partition of everything before the day
-- after its last call (no copy); an empty one is replaced.

DROP TRIGGER provider_call_hour_add ON provider_call;
ALTER TABLE provider_call RENAME TO provider_call_before;
ALTER TABLE provider_call_before RENAME CONSTRAINT provider_call_pkey TO provider_call_before_pkey;
ALTER INDEX idx_provider_call_key RENAME TO provider_call_before_key;
ALTER INDEX idx_provider_call_started RENAME TO provider_call_before_started;

CREATE TABLE provider_call (
    LIKE provider_call_before INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE
) PARTITION BY RANGE (started_at);
-- The ids go on from the old table's sequence, which must not go with it.
ALTER SEQUENCE provider_call_id_seq OWNED BY provider_call.id;
-- A partitioned table's key includes its partition key: a call's handle is (id, started_at),
-- which also lets its finish find the one partition to look in.
ALTER TABLE provider_call ADD CONSTRAINT provider_call_pkey PRIMARY KEY (id, started_at);
CREATE INDEX idx_provider_call_key ON provider_call (idempotency_key);
CREATE INDEX idx_provider_call_started ON provider_call (started_at);
CREATE TABLE provider_call_default PARTITION OF provider_call DEFAULT;

-- The totals' column list, now on the partitioned table's row type (unchanged otherwise: V13).
DROP FUNCTION provider_call_hour_apply(provider_call_before, int);
CREATE FUNCTION provider_call_hour_apply(c provider_call, sign int) RETURNS void
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

-- A row's delete now takes it out of the totals: rows leave the ledger by whole partitions
-- (DROP, no trigger), so a DELETE is a row moving between partitions (an UPDATE of
-- started_at across days runs as a DELETE and an INSERT) or a correction. Retention of the
-- DEFAULT partition's old rows is the one delete that keeps the money: it says so with
-- `triage.ledger_retention`.
CREATE OR REPLACE FUNCTION provider_call_hour_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF current_setting('triage.ledger_retention', true) IS DISTINCT FROM 'on' THEN
            PERFORM provider_call_hour_apply(OLD, -1);
        END IF;
        RETURN NULL;
    END IF;
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

-- On the partitioned table: PostgreSQL clones it onto every partition, present and future.
CREATE TRIGGER provider_call_hour_add
    AFTER INSERT OR UPDATE OR DELETE ON provider_call
    FOR EACH ROW EXECUTE FUNCTION provider_call_hour_add();

-- The upper bound of a partition ('infinity' for DEFAULT), read from its catalogue bound.
CREATE FUNCTION provider_call_partition_end(part regclass) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN b = 'DEFAULT' THEN 'infinity'::timestamptz
                ELSE substring(b FROM 'TO \(''([^'']+)''\)')::timestamptz END
    FROM (SELECT pg_get_expr(c.relpartbound, c.oid) AS b FROM pg_class c WHERE c.oid = part) p
$$;

-- The sweeper's upkeep, one call per sweep: daily partitions from today to `ahead_days` days
-- ahead (any rows the DEFAULT partition caught for such a day are moved in, counted out and
-- back in: net zero), then, with `keep` given, drops every partition whose last instant is
-- older than now() - keep and deletes the DEFAULT partition's rows that old. Returns the
-- partitions dropped. One sweeper at a time (an advisory lock); the DDL takes the table's
-- lock for a moment, and waits at most a second for it.
CREATE FUNCTION provider_call_partitions(ahead_days int, keep interval) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    day_start timestamptz;
    covered timestamptz;
    caught boolean;
    part record;
    dropped int := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(7431014);
    SELECT coalesce(max(provider_call_partition_end(i.inhrelid)) FILTER (
               WHERE provider_call_partition_end(i.inhrelid) < 'infinity'), '-infinity')
    INTO covered
    FROM pg_inherits i WHERE i.inhparent = 'provider_call'::regclass;
    day_start := greatest(date_trunc('day', now(), 'UTC'), covered);
    -- The DDL queues behind any transaction on the ledger, and every insert behind it: a
    -- short wait, or the day is left to the next sweep (days are created well ahead).
    PERFORM set_config('lock_timeout', '1s', true);
    WHILE day_start <= date_trunc('day', now(), 'UTC') + make_interval(days => ahead_days) LOOP
        BEGIN
            caught := EXISTS (SELECT 1 FROM provider_call_default
                              WHERE started_at >= day_start AND started_at < day_start + interval '1 day');
            IF caught THEN
                IF to_regclass('pg_temp.provider_call_moving') IS NULL THEN
                    CREATE TEMP TABLE provider_call_moving (LIKE provider_call) ON COMMIT DROP;
                END IF;
                WITH moved AS (
                    DELETE FROM provider_call_default
                    WHERE started_at >= day_start AND started_at < day_start + interval '1 day'
                    RETURNING *
                )
                INSERT INTO provider_call_moving SELECT * FROM moved;
            END IF;
            EXECUTE format('CREATE TABLE %I PARTITION OF provider_call FOR VALUES FROM (%L) TO (%L)',
                           'provider_call_' || to_char(day_start AT TIME ZONE 'UTC', 'YYYYMMDD'),
                           day_start, day_start + interval '1 day');
            IF caught THEN
                INSERT INTO provider_call SELECT * FROM provider_call_moving;
                DELETE FROM provider_call_moving;
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            RAISE NOTICE 'ledger partitions: % left to the next sweep (the table is busy)', day_start;
            EXIT;
        END;
        day_start := day_start + interval '1 day';
    END LOOP;
    IF keep IS NOT NULL THEN
        FOR part IN
            SELECT i.inhrelid::regclass AS rel FROM pg_inherits i
            WHERE i.inhparent = 'provider_call'::regclass
              AND provider_call_partition_end(i.inhrelid) <= now() - keep
        LOOP
            BEGIN
                EXECUTE format('DROP TABLE %s', part.rel);
                dropped := dropped + 1;
            EXCEPTION WHEN lock_not_available THEN
                RAISE NOTICE 'ledger partitions: % left to the next sweep (the table is busy)', part.rel;
            END;
        END LOOP;
        PERFORM set_config('triage.ledger_retention', 'on', true);
        DELETE FROM provider_call_default WHERE started_at < now() - keep;
        PERFORM set_config('triage.ledger_retention', 'off', true);
    END IF;
    RETURN dropped;
END
$$;

-- The old table: the partition of everything before the day after its last call, or gone.
DO $$
DECLARE
    last_call timestamptz;
BEGIN
    SELECT max(started_at) INTO last_call FROM provider_call_before;
    IF last_call IS NULL THEN
        DROP TABLE provider_call_before;
    ELSE
        ALTER TABLE provider_call_before DROP CONSTRAINT provider_call_before_pkey;
        EXECUTE format('ALTER TABLE provider_call ATTACH PARTITION provider_call_before '
                       'FOR VALUES FROM (MINVALUE) TO (%L)',
                       date_trunc('day', last_call, 'UTC') + interval '1 day');
    END IF;
END
$$;

SELECT provider_call_partitions(3, NULL);

-- The limits the provider announces in its headers (requests and tokens a minute), for the
-- fleet: the worker that hears a new value writes it here, every worker reads it at its claim,
-- so the ceiling is lowered for all, not for the process that heard it (issue 22, item 4).
ALTER TABLE provider_rate_limit
    ADD COLUMN announced_rpm int CHECK (announced_rpm > 0),
    ADD COLUMN announced_tpm int CHECK (announced_tpm > 0);
