-- The Zendesk connector (docs/zendesk.md): tickets that arrive as Zendesk's webhook events,
-- written back through the delivery outbox, and the agents' corrections as feedback.

-- One row per Zendesk ticket the connector has seen, made in the transaction that creates its
-- triage ticket: its key makes Zendesk's retries of an event, and two events for one Zendesk
-- ticket, one ticket. Erasing the triage ticket leaves the row with no ticket (a tombstone):
-- later events for that Zendesk ticket are ignored, never a new ticket.
CREATE TABLE zendesk_ticket (
    account_id        bigint NOT NULL,
    zendesk_id        bigint NOT NULL,
    ticket_id         uuid UNIQUE REFERENCES ticket (id) ON DELETE SET NULL,
    -- What the connector last wrote (NULL: nothing yet), so that a later answer replaces its
    -- own group and priority but never an agent's, and its own updates are not corrections.
    written_group_id  bigint,
    written_priority  text,
    -- The priority the ticket had before the connector made it urgent (restored when a
    -- provisional "urgent" is not the final answer and nobody changed it since).
    priority_before   text,
    written_tags      text[] NOT NULL DEFAULT '{}',
    written_at        timestamptz,
    conflicts         integer NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, zendesk_id)
);

-- The connector's own API user per account (read by the deliverer from /users/me): change
-- events whose actor it is are our own updates, never corrections.
CREATE TABLE zendesk_account (
    account_id   bigint PRIMARY KEY,
    api_user_id  bigint NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Change events already applied as corrections (Zendesk retries an event with its id).
CREATE TABLE zendesk_event (
    id           text PRIMARY KEY,
    received_at  timestamptz NOT NULL DEFAULT now()
);

-- The write-back is one more kind of delivery target: one per desk principal.
ALTER TABLE subscription DROP CONSTRAINT subscription_kind_check;
ALTER TABLE subscription ADD CONSTRAINT subscription_kind_check
    CHECK (kind IN ('webhook', 'eventbridge', 'zendesk'));
CREATE UNIQUE INDEX idx_subscription_zendesk ON subscription (owner) WHERE kind = 'zendesk';

-- The API stores the events (`grant_api_role()`, V28, with these added).
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
END
$$;
SELECT grant_api_role();

-- The deliverer writes back (`grant_deliver_role()`, V27, with these added).
CREATE OR REPLACE FUNCTION grant_deliver_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_deliver') THEN
        RETURN;
    END IF;
    GRANT SELECT, UPDATE ON delivery TO triage_deliver;
    GRANT SELECT, INSERT ON subscription TO triage_deliver;
    GRANT UPDATE (failing_since, disabled_at, disabled_reason) ON subscription TO triage_deliver;
    GRANT SELECT ON evaluation_result, provisional_result TO triage_deliver;
    GRANT SELECT (id, subject, message, created_at, held_until) ON ticket TO triage_deliver;
    GRANT SELECT ON pause TO triage_deliver;
    -- Zendesk: what was written, the account's API user, the group mapping, and the
    -- account's rate limit shared by every deliverer.
    GRANT SELECT, UPDATE ON zendesk_ticket TO triage_deliver;
    GRANT SELECT, INSERT, UPDATE ON zendesk_account TO triage_deliver;
    GRANT SELECT ON taxonomy TO triage_deliver;
    GRANT SELECT, INSERT, UPDATE ON provider_rate_limit TO triage_deliver;
END
$$;
SELECT grant_deliver_role();
