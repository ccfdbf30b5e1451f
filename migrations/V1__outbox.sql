-- The article's three tables, plus what lets every ticket (duplicates included) reach the
-- evaluation of its content, fencing for claims, and request-level idempotency.

CREATE TABLE ticket (
    id          uuid PRIMARY KEY,
    subject     text NOT NULL,
    message     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Which content keys a ticket is evaluated under: one at ingest, one more per reprocess.
-- Duplicates share a key, so they share the one job and the one result.
CREATE TABLE ticket_evaluation (
    ticket_id        uuid NOT NULL REFERENCES ticket (id),
    idempotency_key  text NOT NULL,
    prompt_version   text NOT NULL,
    model_version    text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ticket_id, idempotency_key)
);

CREATE TABLE evaluation_outbox (
    id               bigserial PRIMARY KEY,
    ticket_id        uuid NOT NULL REFERENCES ticket (id),
    idempotency_key  text NOT NULL UNIQUE,
    -- The versions this job is evaluated under (reprocess enqueues new ones).
    prompt_version   text NOT NULL,
    model_version    text NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'processing', 'done', 'dead')),
    attempts         int  NOT NULL DEFAULT 0,
    available_at     timestamptz NOT NULL DEFAULT now(),
    locked_by        text,
    locked_until     timestamptz,
    -- Fencing: a new token per claim; every later write must present it.
    claim_token      uuid,
    last_error       text,
    -- Reason class of a dead letter (report grouping) or of the last retry.
    error_class      text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);

-- Serves the claim: only what is ready to run.
CREATE INDEX idx_outbox_claimable ON evaluation_outbox (available_at) WHERE status = 'pending';
-- Serves the sweeper: only live leases.
CREATE INDEX idx_outbox_leases ON evaluation_outbox (locked_until) WHERE status = 'processing';
-- Serves the dead-letter report and redrive.
CREATE INDEX idx_outbox_dead ON evaluation_outbox (finished_at) WHERE status = 'dead';

CREATE TABLE evaluation_result (
    idempotency_key  text PRIMARY KEY,
    ticket_id        uuid NOT NULL REFERENCES ticket (id),
    is_urgent        double precision NOT NULL,
    department       text NOT NULL,
    urgency_score    double precision NOT NULL,
    model_version    text NOT NULL,
    prompt_version   text NOT NULL,
    policy_version   text NOT NULL,
    computed_at      timestamptz NOT NULL DEFAULT now()
);

-- Request-level `Idempotency-Key` header (IETF httpapi draft): the first response is replayed.
CREATE TABLE request_idempotency (
    key                  text PRIMARY KEY,
    request_fingerprint  text NOT NULL,
    ticket_id            uuid NOT NULL,
    response_status      int  NOT NULL,
    response_body        jsonb NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    expires_at           timestamptz NOT NULL
);
CREATE INDEX idx_request_idempotency_expiry ON request_idempotency (expires_at);
