-- The daily budget's grants (issue 22, docs/ledger.md): far from the line a worker claims
-- without a decision per claim. A decision that keeps every job it was asked about also sets
-- aside part of what is left for the asking worker (its grant, a reservation every other
-- decision counts), and the worker claims under it without deciding again, each job at its own
-- estimate, until the grant does not cover a claim. Near the line grants shrink to nothing and
-- every claim is decided, as before.

-- A worker's grant: what it was granted and not yet claimed, plus what it claimed under its
-- grant and has not started (jobs whose ledger row does not carry their estimate yet). The
-- worker reports the second part at each decision, which sets the row afresh; `until` outlasts
-- its invocation (a lease from the decision), so a worker that dies leaves nothing behind for
-- longer than its jobs' leases.
CREATE TABLE budget_grant (
    worker text PRIMARY KEY,
    usd float8 NOT NULL CHECK (usd >= 0),
    until timestamptz NOT NULL
);

-- Today's spend, and what may still be spent: kept jobs' reservations and live grants.
CREATE OR REPLACE FUNCTION budget_spend(OUT spent_usd float8, OUT reserved_usd float8)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- PL/pgSQL rather than SQL: its plans are kept for the session, not made on every call.
    SELECT coalesce(sum(cost_usd), 0)::float8 INTO spent_usd FROM provider_call_hour
    WHERE hour >= date_trunc('day', now(), 'UTC');
    SELECT coalesce(sum(o.reserved_usd), 0)::float8
           + (SELECT coalesce(sum(g.usd), 0) FROM budget_grant g WHERE g.until > now())
    INTO reserved_usd FROM evaluation_outbox o
    WHERE o.status = 'processing' AND o.locked_until >= now() AND o.reserved_usd > 0;
END
$$;

-- V15's decision, and the grant: `worker` (NULL: no grant, as for a provider batch) reports
-- `outstanding`, what it claimed under its grant and has not started, which replaces its
-- grant's row in the count; when every job was kept it is granted up to `ask` more, at most
-- half of what is left after them (so one worker never takes all the room), for
-- `lease_seconds`.
DROP FUNCTION budget_keep(bigint[], float8[], float8);
CREATE FUNCTION budget_keep(ids bigint[], estimates float8[], budget_usd float8,
                            worker text DEFAULT NULL, outstanding float8 DEFAULT 0,
                            ask float8 DEFAULT 0, lease_seconds float8 DEFAULT 0,
                            OUT spent_usd float8, OUT reserved_usd float8, OUT kept int,
                            OUT granted float8)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    estimate float8;
    before float8 := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(7431001);
    SELECT s.spent_usd, s.reserved_usd INTO spent_usd, reserved_usd FROM budget_spend() s;
    IF worker IS NOT NULL THEN
        reserved_usd := reserved_usd + greatest(outstanding, 0) - coalesce(
            (SELECT g.usd FROM budget_grant g WHERE g.worker = budget_keep.worker AND g.until > now()), 0);
    END IF;
    kept := 0;
    IF spent_usd < budget_usd THEN
        FOREACH estimate IN ARRAY estimates LOOP
            EXIT WHEN budget_usd - spent_usd - greatest(reserved_usd, 0) - before <= 0;
            kept := kept + 1;
            before := before + greatest(estimate, 0);
        END LOOP;
    END IF;
    IF kept > 0 THEN
        UPDATE evaluation_outbox o SET reserved_usd = r.usd
        FROM unnest(ids[1:kept], estimates[1:kept]) AS r(id, usd)
        WHERE o.id = r.id;
    END IF;
    granted := 0;
    IF worker IS NOT NULL THEN
        IF kept = coalesce(array_length(ids, 1), 0) THEN
            granted := least(greatest(ask, 0),
                             greatest(budget_usd - spent_usd - greatest(reserved_usd, 0) - before, 0) / 2);
        END IF;
        IF greatest(outstanding, 0) + granted > 0 THEN
            INSERT INTO budget_grant AS g (worker, usd, until)
            VALUES (worker, greatest(outstanding, 0) + granted,
                    now() + make_interval(secs => lease_seconds))
            ON CONFLICT ON CONSTRAINT budget_grant_pkey
            DO UPDATE SET usd = excluded.usd, until = excluded.until;
        ELSE
            DELETE FROM budget_grant g WHERE g.worker = budget_keep.worker;
        END IF;
    END IF;
END
$$;
-- Only the pipeline's own role decides (the API's login never claims).
REVOKE EXECUTE ON FUNCTION budget_keep(bigint[], float8[], float8, text, float8, float8, float8)
    FROM PUBLIC;
