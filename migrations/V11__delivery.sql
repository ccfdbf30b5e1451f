-- Delivery (docs/delivery.md): each stored result reaches its subscribers from a second queue,
-- written in the result's own transaction and claimed, leased, fenced and swept by the same
-- machinery as evaluations (pipeline::outbox::lease).

-- Where results go: a caller's webhook endpoint, or the deployment's EventBridge bus (which
-- receives every production ticket).
CREATE TABLE subscription (
    id                     uuid PRIMARY KEY,
    kind                   text NOT NULL DEFAULT 'webhook' CHECK (kind IN ('webhook', 'eventbridge')),
    -- A webhook's caller, as `ticket.owner` (V8) stores it; NULL for the bus (every ticket).
    owner                  text,
    -- The endpoint's URL, or the bus's name or ARN.
    target                 text NOT NULL,
    -- Standard Webhooks `whsec_` secrets; the previous one is still signed with until
    -- `previous_secret_until` (rotation window).
    secret                 text,
    previous_secret        text,
    previous_secret_until  timestamptz,
    include_text           boolean NOT NULL DEFAULT false,
    created_at             timestamptz NOT NULL DEFAULT now(),
    -- Since when every attempt failed (NULL after a success): past the retry window, disabled.
    failing_since          timestamptz,
    disabled_at            timestamptz,
    disabled_reason        text
);
CREATE INDEX idx_subscription_owner ON subscription (owner) WHERE disabled_at IS NULL;

-- One row per (subscriber, event): the delivery outbox. Same columns as evaluation_outbox
-- for the lease, fence and retry, so both are driven by the same code.
CREATE TABLE delivery (
    id               bigserial PRIMARY KEY,
    subscription_id  uuid NOT NULL REFERENCES subscription (id) ON DELETE CASCADE,
    -- Stable across retries and replays of the same (ticket, result key): consumers dedupe on it.
    event_id         text NOT NULL,
    ticket_id        uuid NOT NULL REFERENCES ticket (id) ON DELETE CASCADE,
    idempotency_key  text NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'processing', 'done', 'dead')),
    attempts         int  NOT NULL DEFAULT 0,
    available_at     timestamptz NOT NULL DEFAULT now(),
    locked_by        text,
    locked_until     timestamptz,
    claim_token      uuid,
    last_error       text,
    error_class      text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    UNIQUE (subscription_id, event_id)
);
-- Serves the claim (per endpoint, oldest first), the sweeper, and the lag metric.
CREATE INDEX idx_delivery_claimable ON delivery (subscription_id, available_at) WHERE status = 'pending';
CREATE INDEX idx_delivery_leases ON delivery (locked_until) WHERE status = 'processing';
-- What each endpoint has in flight (the claim's bound per endpoint).
CREATE INDEX idx_delivery_in_flight ON delivery (subscription_id) WHERE status = 'processing';
CREATE INDEX idx_delivery_pending_age ON delivery (created_at) WHERE status IN ('pending', 'processing');
CREATE INDEX idx_delivery_ticket ON delivery (ticket_id);
CREATE INDEX idx_delivery_finished ON delivery (subscription_id, created_at);

ALTER TABLE delivery SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    fillfactor = 80
);

-- The API manages its callers' subscriptions, and ingest announces a duplicate ticket's
-- existing result (pipeline::delivery::fanout): `grant_api_role()` (V8) is the one list of what
-- the API's role may do, so it is replaced with these tables added and run again.
CREATE OR REPLACE FUNCTION grant_api_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        RETURN;
    END IF;
    GRANT SELECT, INSERT ON ticket, ticket_evaluation, evaluation_outbox, request_idempotency,
        caller_daily_tickets, delivery TO triage_api;
    -- A request key past its expiry is taken over; the day's count goes up.
    GRANT UPDATE ON request_idempotency, caller_daily_tickets TO triage_api;
    GRANT SELECT ON evaluation_result, version_promotion TO triage_api;
    GRANT SELECT, INSERT, UPDATE, DELETE ON subscription TO triage_api;
    GRANT USAGE ON SEQUENCE evaluation_outbox_id_seq, delivery_id_seq TO triage_api;
END
$$;
SELECT grant_api_role();
