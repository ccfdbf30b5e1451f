-- Delivery (docs/delivery.md): each stored result reaches its subscribers from a second queue,
-- written in the result's own transaction and claimed, leased, fenced and swept by the same
-- machinery as evaluations (pipeline::outbox::lease).

-- Whose ticket it is: the digest of the creating principal (http::Caller::owner), NULL for an
-- anonymous (local) caller. Subscriptions only ever receive their own owner's tickets.
ALTER TABLE ticket ADD COLUMN IF NOT EXISTS owner text;

-- Where results go: a caller's webhook endpoint, or the deployment's EventBridge bus (which
-- receives every production ticket).
CREATE TABLE subscription (
    id                     uuid PRIMARY KEY,
    kind                   text NOT NULL DEFAULT 'webhook' CHECK (kind IN ('webhook', 'eventbridge')),
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

-- The API manages its callers' subscriptions; ingest announces a duplicate ticket's existing
-- result (pipeline::delivery::fanout).
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        GRANT SELECT, INSERT, UPDATE, DELETE ON subscription TO triage_api;
        GRANT SELECT, INSERT ON delivery TO triage_api;
        GRANT USAGE ON SEQUENCE delivery_id_seq TO triage_api;
    END IF;
END
$$;
