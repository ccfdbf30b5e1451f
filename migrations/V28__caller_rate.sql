-- Requests one principal made in one UTC minute, every API route counted
-- (`TRIAGE_CALLER_RPM`, `http::rate`), beside the daily ticket quota and counted the same way:
-- in PostgreSQL, so across every API instance. The sweeper removes minutes past.
CREATE TABLE caller_minute_requests (
    owner    text NOT NULL,
    minute   timestamptz NOT NULL,
    requests integer NOT NULL,
    PRIMARY KEY (owner, minute)
);

-- The API counts its callers' requests (`grant_api_role()`, V26, with it).
CREATE OR REPLACE FUNCTION grant_api_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        RETURN;
    END IF;
    GRANT SELECT, INSERT ON ticket, ticket_evaluation, evaluation_outbox, request_idempotency,
        caller_daily_tickets, caller_minute_requests, delivery TO triage_api;
    -- A request key past its expiry is taken over; the day's and the minute's counts go up.
    GRANT UPDATE ON request_idempotency, caller_daily_tickets, caller_minute_requests TO triage_api;
    GRANT SELECT ON evaluation_result, version_promotion, provisional_result TO triage_api;
    GRANT SELECT, INSERT, UPDATE, DELETE ON subscription TO triage_api;
    GRANT USAGE ON SEQUENCE evaluation_outbox_id_seq, delivery_id_seq TO triage_api;
    -- Feedback: a new one supersedes the current one, whose matches go (and with them its
    -- share of the running totals, which the trigger keeps); a ticket's history beyond its
    -- cap is removed.
    GRANT SELECT, INSERT, DELETE ON ticket_feedback TO triage_api;
    GRANT UPDATE (superseded_at) ON ticket_feedback TO triage_api;
    GRANT SELECT, INSERT, DELETE ON feedback_match TO triage_api;
    GRANT SELECT, INSERT, UPDATE ON feedback_agreement_day TO triage_api;
    GRANT USAGE ON SEQUENCE ticket_feedback_id_seq TO triage_api;
END
$$;
SELECT grant_api_role();

-- A ticket's feedback history is capped (`pipeline::feedback`): the labels beyond its newest
-- are found by ticket. ticket_feedback holds a row per label given, small beside the tickets.
CREATE INDEX idx_ticket_feedback_ticket ON ticket_feedback (ticket_id, id);
