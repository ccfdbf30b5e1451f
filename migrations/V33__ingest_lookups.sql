-- Ingest planned in small pieces (issue 43, the hot paths). Every pooled session plans each
-- execution of its prepared statements (`plan_cache_mode = force_custom_plan`, so that no plan
-- made for tables analyzed empty is kept: docs/database.md). Ingest was one statement of four
-- CTEs and, since V27, the dedup hold's two joined probes: planned on every ticket, about
-- 250 us of the database's CPU each, half the API's throughput beside pgbench running the
-- statement on its kept plan (docs/benchmarks.md). Here it is a function of single-table
-- statements, each still planned for the tables as they are, but cheap to plan, and the ones
-- only a duplicate needs run only for a duplicate. The caller's request rate and daily quota,
-- when set, are counted by the same call: a ticket is one round trip whatever the limits.

-- One request of `who` counted in this UTC minute (`TRIAGE_CALLER_RPM`, `limits::caller_rate`,
-- V28); NULL, and nothing counted, when it made its `rpm` requests of the minute already.
CREATE FUNCTION caller_minute_count(who text, rpm int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    counted int;
BEGIN
    INSERT INTO caller_minute_requests AS c (owner, minute, requests)
    VALUES (who, date_trunc('minute', now()), 1)
    ON CONFLICT (owner, minute) DO UPDATE SET requests = c.requests + 1
        WHERE c.requests < rpm
    RETURNING requests INTO counted;
    RETURN counted;
END
$$;

-- One ticket of `who` counted against its quota for today (UTC, `TRIAGE_CALLER_DAILY_TICKETS`);
-- NULL, and nothing counted, when the quota is used up. The row lock serialises one owner's
-- concurrent ingests for the rest of the transaction.
CREATE FUNCTION caller_day_count(who text, quota int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    counted int;
BEGIN
    INSERT INTO caller_daily_tickets AS c (owner, day, tickets)
    VALUES (who, (now() AT TIME ZONE 'UTC')::date, 1)
    ON CONFLICT (owner, day) DO UPDATE SET tickets = c.tickets + 1
        WHERE c.tickets < quota
    RETURNING tickets INTO counted;
    RETURN counted;
END
$$;

-- The event id of (ticket, result key): the same on every retry and replay, so consumers dedupe
-- on it. An immutable SQL expression, inlined where it is used; the one place it is computed
-- (`announce::event_id!` calls it).
CREATE FUNCTION delivery_event_id(ticket uuid, result_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 'evt_' || left(encode(sha256(convert_to(ticket::text || '/' || result_key, 'UTF8')), 'hex'), 32);

-- Ticket, link and job (`pipeline::ingest`): one call, one implicit transaction. `ON CONFLICT DO
-- NOTHING` keeps the job (and the bill) single for content already queued. A duplicate whose
-- content already has a result is announced to its owner's subscribers here, as the job's
-- completion does for the tickets it finds waiting.
--
-- A ticket whose content another owner sent first is held (`held_until`, a random 0.5 to 1.5
-- times `hold_seconds` from now): shown pending and announced no earlier, as a fresh
-- evaluation would be, so that dedup tells its sender nothing (docs/dedup.md); not when the
-- owner sent the content before itself (it knows). Content never seen has no links, and its
-- ticket costs one index probe for them and one for a result; the links' tickets are read (by
-- primary key) only when there are links. The lookups run before this ticket's own rows exist.
--
-- The job carries the taxonomy it was ingested under, `new_policy` (V30; docs/taxonomy.md).
--
-- With `rpm` (NULL: no rate) the request is counted first: past the rate, `refused` is 'rate'
-- and nothing is counted or written. With `quota` (NULL: none) the ticket is counted next:
-- past it, 'quota', and only the request's count is kept (as every refused request counts
-- against the rate).
CREATE FUNCTION ticket_ingest(new_id uuid, new_subject text, new_message text, new_key text,
                              new_prompt text, new_model text, new_owner text,
                              hold_seconds float8, rpm int, quota int, new_policy text,
                              OUT created timestamptz, OUT refused text)
LANGUAGE plpgsql AS $$
DECLARE
    linked uuid[];
    held timestamptz;
BEGIN
    -- Nested, not `AND`: SQL promises no order of evaluation, and each count writes.
    IF rpm IS NOT NULL THEN
        IF caller_minute_count(new_owner, rpm) IS NULL THEN
            refused := 'rate';
            RETURN;
        END IF;
    END IF;
    IF quota IS NOT NULL THEN
        IF caller_day_count(new_owner, quota) IS NULL THEN
            refused := 'quota';
            RETURN;
        END IF;
    END IF;
    SELECT array_agg(ticket_id) INTO linked FROM ticket_evaluation WHERE idempotency_key = new_key;
    IF hold_seconds > 0 AND linked IS NOT NULL THEN
        SELECT CASE WHEN bool_or(owner IS DISTINCT FROM new_owner AND workload = 'production')
                     AND NOT bool_or(owner IS NOT DISTINCT FROM new_owner)
                    THEN now() + make_interval(secs => hold_seconds * (0.5 + random())) END
        INTO held FROM ticket WHERE id = ANY (linked);
    END IF;

    WITH new_ticket AS (
        INSERT INTO ticket (id, subject, message, owner, held_until)
        VALUES (new_id, new_subject, new_message, new_owner, held)
        RETURNING created_at
    ), link AS (
        INSERT INTO ticket_evaluation (ticket_id, idempotency_key, prompt_version, model_version)
        VALUES (new_id, new_key, new_prompt, new_model)
    ), job AS (
        INSERT INTO evaluation_outbox
            (ticket_id, idempotency_key, prompt_version, model_version, policy_version)
        VALUES (new_id, new_key, new_prompt, new_model, new_policy)
        ON CONFLICT (idempotency_key) DO NOTHING
    )
    SELECT created_at INTO created FROM new_ticket;

    IF EXISTS (SELECT FROM evaluation_result WHERE idempotency_key = new_key) THEN
        INSERT INTO delivery (subscription_id, ticket_id, idempotency_key, event_id, available_at)
        SELECT s.id, new_id, new_key, delivery_event_id(new_id, new_key), greatest(now(), held)
        FROM subscription s
        WHERE s.disabled_at IS NULL
          AND (s.kind = 'eventbridge' OR s.owner IS NOT DISTINCT FROM new_owner);
    END IF;
END
$$;
