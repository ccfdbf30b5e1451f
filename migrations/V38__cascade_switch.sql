-- The cascade kept fresh (issue 39, item 3; docs/cascade.md "Kept fresh"): a configured
-- cascade answers new tickets with the classifier switched to last, if any; `triage retrain`
-- switches when its candidate passes the gate, `triage models switch` by hand (a rollback).
-- History kept: the newest row is the live one. Who and why, for the audit's reader.
CREATE TABLE cascade_switch (
    id bigserial PRIMARY KEY,
    local_version text NOT NULL,
    switched_at timestamptz NOT NULL DEFAULT now(),
    switched_by text NOT NULL,
    reason text NOT NULL
);

-- The API reads which classifier a configured cascade is switched to (`grant_api_role()`, V32,
-- with it added).
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
    -- Zendesk's events: the ticket's row, the applied change events, who our API user is,
    -- and the taxonomy a correction's group is mapped back through.
    GRANT SELECT, INSERT, UPDATE ON zendesk_ticket TO triage_api;
    GRANT SELECT, INSERT ON zendesk_event TO triage_api;
    GRANT SELECT ON zendesk_account, taxonomy TO triage_api;
    -- A configured cascade keys new tickets under the classifier switched to last (V38).
    GRANT SELECT ON cascade_switch TO triage_api;
END
$$;
SELECT grant_api_role();
