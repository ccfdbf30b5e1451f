-- The daily budget's decision in one statement (docs/ledger.md, issue 22): a claim under a
-- budget used to take the fleet's advisory lock and then read, decide in Rust and reserve over
-- three more round trips, so every budgeted claim in the fleet waited for one worker's network
-- turnarounds (43% of the claim rate without a budget). Here the lock, the read, the decision
-- and the reservations run in the server, and the lock goes with the statement's commit.

-- Today's spend (the running totals, V9) and what claimed jobs may still cost: each job holds
-- its estimate from the decision that kept it until its call's ledger row carries it (the
-- ledger's start clears `reserved_usd`), a few rows on the lease index. One place for the read:
-- the decision below and the reports (`budget::spend`) both call it.
CREATE FUNCTION budget_spend(OUT spent_usd float8, OUT reserved_usd float8)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- PL/pgSQL rather than SQL: its plans are kept for the session, not made on every call.
    SELECT coalesce(sum(cost_usd), 0)::float8 INTO spent_usd FROM provider_call_hour
    WHERE hour >= date_trunc('day', now(), 'UTC');
    SELECT coalesce(sum(o.reserved_usd), 0)::float8 INTO reserved_usd FROM evaluation_outbox o
    WHERE o.status = 'processing' AND o.locked_until >= now() AND o.reserved_usd > 0;
END
$$;

-- Of the jobs just claimed (`ids`, in claim order, each at its `estimates`), keeps the first
-- `kept` while money is left before each under `budget_usd`, so only the last kept may cross
-- the line, and reserves their estimates. The rest are the caller's to give back. One decision
-- at a time across the fleet: the lock is taken first, and each statement after it reads with
-- a snapshot of its own (a VOLATILE function's), so it sees every decision committed before.
CREATE FUNCTION budget_keep(ids bigint[], estimates float8[], budget_usd float8,
                            OUT spent_usd float8, OUT reserved_usd float8, OUT kept int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    estimate float8;
    before float8 := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(7431001);
    SELECT s.spent_usd, s.reserved_usd INTO spent_usd, reserved_usd FROM budget_spend() s;
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
END
$$;
-- Only the pipeline's own role decides (the API's login never claims).
REVOKE EXECUTE ON FUNCTION budget_keep(bigint[], float8[], float8) FROM PUBLIC;
