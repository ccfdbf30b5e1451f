-- The ledger's running totals (docs/ledger.md): per UTC hour, provider and workload, what the
-- calls cost, used and came to. The daily budget reads today's rows instead of summing the
-- day's calls under its lock; the stats, the sweeper's report, the console and the fleet
-- read them instead of scanning `provider_call`.
--
-- A trigger keeps them, so every write to a ledger row (the insert at the reserved estimate,
-- the finish with the usage, any later correction) moves the totals in the same statement,
-- by the difference it made: a write repeated after a blink changes nothing the second time.
-- Deleting ledger rows (erasure, retention) does not: the money was spent.

CREATE TABLE provider_call_hour (
    hour                timestamptz NOT NULL,
    provider            text NOT NULL,
    workload            text NOT NULL,
    calls               bigint NOT NULL DEFAULT 0,
    ok                  bigint NOT NULL DEFAULT 0,
    -- Finished with a failure (outcome neither 'ok' nor 'in_flight').
    failed              bigint NOT NULL DEFAULT 0,
    billed              bigint NOT NULL DEFAULT 0,
    -- Billing unknown: in flight, or a timeout the provider may have served.
    billing_unknown     bigint NOT NULL DEFAULT 0,
    input_tokens        bigint NOT NULL DEFAULT 0,
    output_tokens       bigint NOT NULL DEFAULT 0,
    -- Calls of unknown outcome count at their reserved estimate until their usage is known.
    cost_usd            numeric(20, 8) NOT NULL DEFAULT 0,
    -- Billed answers within the contract, and what they cost: the average answer's price.
    ok_billed           bigint NOT NULL DEFAULT 0,
    ok_billed_cost_usd  numeric(20, 8) NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, provider, workload)
);

CREATE FUNCTION provider_call_hour_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- An update moves the totals by new minus old: the old row is taken out first.
    IF TG_OP = 'UPDATE' THEN
        IF (OLD.started_at, OLD.provider, OLD.workload, OLD.outcome, OLD.billed,
            OLD.input_tokens, OLD.output_tokens, OLD.cost_usd)
           IS NOT DISTINCT FROM
           (NEW.started_at, NEW.provider, NEW.workload, NEW.outcome, NEW.billed,
            NEW.input_tokens, NEW.output_tokens, NEW.cost_usd) THEN
            RETURN NULL;
        END IF;
        PERFORM provider_call_hour_apply(OLD, -1);
    END IF;
    PERFORM provider_call_hour_apply(NEW, 1);
    RETURN NULL;
END
$$;

CREATE FUNCTION provider_call_hour_apply(c provider_call, sign int) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO provider_call_hour AS h
        (hour, provider, workload, calls, ok, failed, billed, billing_unknown, input_tokens,
         output_tokens, cost_usd, ok_billed, ok_billed_cost_usd)
    VALUES (date_trunc('hour', c.started_at, 'UTC'), c.provider, c.workload,
            sign,
            sign * (c.outcome = 'ok')::int,
            sign * (c.outcome NOT IN ('ok', 'in_flight'))::int,
            sign * (c.billed IS TRUE)::int,
            sign * (c.billed IS NULL)::int,
            sign * coalesce(c.input_tokens, 0),
            sign * coalesce(c.output_tokens, 0),
            sign * coalesce(c.cost_usd, 0),
            sign * (c.outcome = 'ok' AND c.billed IS TRUE)::int,
            sign * CASE WHEN c.outcome = 'ok' AND c.billed IS TRUE THEN coalesce(c.cost_usd, 0) ELSE 0 END)
    ON CONFLICT (hour, provider, workload) DO UPDATE SET
        calls = h.calls + excluded.calls,
        ok = h.ok + excluded.ok,
        failed = h.failed + excluded.failed,
        billed = h.billed + excluded.billed,
        billing_unknown = h.billing_unknown + excluded.billing_unknown,
        input_tokens = h.input_tokens + excluded.input_tokens,
        output_tokens = h.output_tokens + excluded.output_tokens,
        cost_usd = h.cost_usd + excluded.cost_usd,
        ok_billed = h.ok_billed + excluded.ok_billed,
        ok_billed_cost_usd = h.ok_billed_cost_usd + excluded.ok_billed_cost_usd
$$;

CREATE TRIGGER provider_call_hour_add
    AFTER INSERT OR UPDATE ON provider_call
    FOR EACH ROW EXECUTE FUNCTION provider_call_hour_add();

-- The calls made before this migration.
INSERT INTO provider_call_hour
    (hour, provider, workload, calls, ok, failed, billed, billing_unknown, input_tokens,
     output_tokens, cost_usd, ok_billed, ok_billed_cost_usd)
SELECT date_trunc('hour', started_at, 'UTC'), provider, workload, count(*),
       count(*) FILTER (WHERE outcome = 'ok'),
       count(*) FILTER (WHERE outcome NOT IN ('ok', 'in_flight')),
       count(*) FILTER (WHERE billed),
       count(*) FILTER (WHERE billed IS NULL),
       coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
       coalesce(sum(cost_usd), 0),
       count(*) FILTER (WHERE outcome = 'ok' AND billed),
       coalesce(sum(cost_usd) FILTER (WHERE outcome = 'ok' AND billed), 0)
FROM provider_call
GROUP BY 1, 2, 3;

-- What a claimed job may cost (its input tokens and the output cap, at its model's price),
-- held against the daily budget from its claim until its call's ledger row carries it.
ALTER TABLE evaluation_outbox ADD COLUMN reserved_usd double precision;

-- Counts the reports show that no partial index keeps small: finished jobs (all retained),
-- dedup hits, and ticket links against distinct content keys (duplicate tickets = links -
-- keys). Triggers keep them in the statement that changes them; each backend adds to its own
-- shard, so completions and ingest never queue on one row. The reports sum a few rows. The
-- trigger functions run as their owner (SECURITY DEFINER), so the API's role (V6) ingests
-- without any privilege on the counts, and nobody but the owner may call the adder.
CREATE TABLE report_count (
    what   text NOT NULL CHECK (what IN ('done', 'dedup', 'links', 'keys')),
    shard  int NOT NULL,
    n      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (what, shard)
);

CREATE FUNCTION report_count_add(counted text, delta bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO report_count AS c (what, shard, n)
    SELECT counted, pg_backend_pid() % 8, delta WHERE delta <> 0
    ON CONFLICT (what, shard) DO UPDATE SET n = c.n + excluded.n
$$;

REVOKE EXECUTE ON FUNCTION report_count_add(text, bigint) FROM PUBLIC;

-- A production job entering or leaving 'done' (completion, retention, erasure, redrive); eval
-- work is not production's to report.
CREATE FUNCTION report_count_jobs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    was_done boolean := TG_OP <> 'INSERT' AND OLD.status = 'done';
    is_done boolean := TG_OP <> 'DELETE' AND NEW.status = 'done';
BEGIN
    PERFORM report_count_add('done', is_done::int - was_done::int);
    PERFORM report_count_add('dedup',
        (is_done AND NEW.finished_by = 'dedup')::int - (was_done AND OLD.finished_by = 'dedup')::int);
    RETURN NULL;
END
$$;

CREATE TRIGGER report_count_jobs_changed
    AFTER UPDATE OF status ON evaluation_outbox
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND (OLD.status = 'done' OR NEW.status = 'done')
                       AND NEW.workload = 'production')
    EXECUTE FUNCTION report_count_jobs();
CREATE TRIGGER report_count_jobs_inserted
    AFTER INSERT ON evaluation_outbox
    FOR EACH ROW WHEN (NEW.status = 'done' AND NEW.workload = 'production')
    EXECUTE FUNCTION report_count_jobs();
CREATE TRIGGER report_count_jobs_deleted
    AFTER DELETE ON evaluation_outbox
    FOR EACH ROW WHEN (OLD.status = 'done' AND OLD.workload = 'production')
    EXECUTE FUNCTION report_count_jobs();

-- Links and keys, per statement: a key counts once however many of its links one statement
-- adds or removes (erasure unlinks duplicates together).
CREATE FUNCTION report_count_links_added() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM report_count_add('links', (SELECT count(*) FROM added));
    PERFORM report_count_add('keys', (
        SELECT count(*) FROM (SELECT idempotency_key, count(*) AS n FROM added GROUP BY 1) a
        WHERE (SELECT count(*) FROM ticket_evaluation te WHERE te.idempotency_key = a.idempotency_key) = a.n));
    RETURN NULL;
END
$$;

CREATE FUNCTION report_count_links_removed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM report_count_add('links', -(SELECT count(*) FROM removed));
    PERFORM report_count_add('keys', -(
        SELECT count(DISTINCT r.idempotency_key) FROM removed r
        WHERE NOT EXISTS (SELECT 1 FROM ticket_evaluation te WHERE te.idempotency_key = r.idempotency_key)));
    RETURN NULL;
END
$$;

CREATE TRIGGER report_count_links_added
    AFTER INSERT ON ticket_evaluation REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION report_count_links_added();
CREATE TRIGGER report_count_links_removed
    AFTER DELETE ON ticket_evaluation REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION report_count_links_removed();

-- What is there before this migration.
INSERT INTO report_count (what, shard, n)
SELECT 'done', 0, count(*) FROM evaluation_outbox WHERE status = 'done' AND workload = 'production'
UNION ALL SELECT 'dedup', 0, count(*) FROM evaluation_outbox
    WHERE status = 'done' AND finished_by = 'dedup' AND workload = 'production'
UNION ALL SELECT 'links', 0, count(*) FROM ticket_evaluation
UNION ALL SELECT 'keys', 0, count(DISTINCT idempotency_key) FROM ticket_evaluation;
