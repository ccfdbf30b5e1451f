-- A desk's daily quota (issue 54 item 4; docs/caller-limits.md, "A desk's tickets"): a help
-- desk's events are never refused (Zendesk does not retry a refusal), so past its quota a desk
-- ticket's job waits for the first UTC day with room, counted in the desk owner's rows of
-- `caller_daily_tickets` (today's and the days after). Days fill in order, so the first day with
-- room is the latest one counted, or the day after it: at most two probes per ticket, whatever
-- the backlog.
--
-- Runs as its owner (SECURITY DEFINER): the API's role may count, not update jobs; the function
-- only ever delays a pending job of a ticket of `who`, never brings one forward.
CREATE FUNCTION desk_quota_place(who text, quota int, new_ticket uuid) RETURNS date
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    today date := (now() AT TIME ZONE 'UTC')::date;
    place date;
    counted int;
BEGIN
    SELECT greatest(today, max(day)) INTO place FROM caller_daily_tickets WHERE owner = who;
    place := coalesce(place, today);
    LOOP
        INSERT INTO caller_daily_tickets AS c (owner, day, tickets) VALUES (who, place, 1)
        ON CONFLICT (owner, day) DO UPDATE SET tickets = c.tickets + 1 WHERE c.tickets < quota
        RETURNING tickets INTO counted;
        EXIT WHEN counted IS NOT NULL;
        place := place + 1;
    END LOOP;
    IF place > today THEN
        UPDATE evaluation_outbox j SET available_at = greatest(j.available_at, place::timestamp AT TIME ZONE 'UTC')
        FROM ticket t
        WHERE j.ticket_id = new_ticket AND j.status = 'pending' AND t.id = j.ticket_id AND t.owner = who;
    END IF;
    RETURN place;
END
$$;
REVOKE EXECUTE ON FUNCTION desk_quota_place(text, int, uuid) FROM PUBLIC;

-- The API places a desk's tickets (`grant_api_role()`, V40, with it added).
CREATE OR REPLACE FUNCTION grant_api_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        RETURN;
    END IF;
    GRANT SELECT, INSERT ON ticket, ticket_evaluation, evaluation_outbox, request_idempotency,
        caller_daily_tickets, caller_minute_requests, delivery TO triage_api;
    GRANT UPDATE ON request_idempotency, caller_daily_tickets, caller_minute_requests TO triage_api;
    GRANT SELECT ON evaluation_result, version_promotion, provisional_result TO triage_api;
    GRANT SELECT, INSERT, UPDATE, DELETE ON subscription TO triage_api;
    GRANT USAGE ON SEQUENCE evaluation_outbox_id_seq, delivery_id_seq TO triage_api;
    GRANT SELECT, INSERT, DELETE ON ticket_feedback TO triage_api;
    GRANT UPDATE (superseded_at) ON ticket_feedback TO triage_api;
    GRANT SELECT, INSERT, DELETE ON feedback_match TO triage_api;
    GRANT SELECT, INSERT, UPDATE ON feedback_agreement_day TO triage_api;
    GRANT USAGE ON SEQUENCE ticket_feedback_id_seq TO triage_api;
    GRANT SELECT, INSERT, UPDATE ON zendesk_ticket TO triage_api;
    GRANT SELECT, INSERT ON zendesk_event TO triage_api;
    GRANT SELECT ON zendesk_account, taxonomy TO triage_api;
    GRANT SELECT ON cascade_switch TO triage_api;
    -- A correction before the write-back is kept (V40).
    GRANT SELECT, INSERT ON zendesk_correction TO triage_api;
    -- A desk ticket past its quota waits (V42).
    GRANT EXECUTE ON FUNCTION desk_quota_place(text, int, uuid) TO triage_api;
END
$$;
SELECT grant_api_role();
