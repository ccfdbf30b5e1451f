-- What the worker needs beyond the article: how a job was finished, the attempt ledger
-- (one row per provider call, written before the call), and the shared circuit breaker.

-- 'evaluated' (a model call produced the result) or 'dedup' (a stored result was reused).
ALTER TABLE evaluation_outbox ADD COLUMN finished_by text;

CREATE TABLE provider_call (
    id               bigserial PRIMARY KEY,
    outbox_id        bigint NOT NULL,
    idempotency_key  text NOT NULL,
    attempt          int NOT NULL,
    worker           text NOT NULL,
    provider         text NOT NULL,
    model_version    text NOT NULL,
    prompt_version   text NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    -- 'in_flight' until the call returns: after a crash it stays, meaning "possibly billed".
    outcome          text NOT NULL DEFAULT 'in_flight',
    error_class      text,
    http_status      int,
    -- NULL while unknown (in flight, or a timeout the provider may still have served).
    billed           boolean,
    input_tokens     bigint,
    output_tokens    bigint,
    cost_usd         numeric(14, 8),
    latency_ms       int
);
CREATE INDEX idx_provider_call_key ON provider_call (idempotency_key);
CREATE INDEX idx_provider_call_started ON provider_call (started_at);

-- One row per provider, shared by every worker instance.
CREATE TABLE provider_breaker (
    provider              text PRIMARY KEY,
    state                 text NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
    consecutive_failures  int NOT NULL DEFAULT 0,
    -- Trips since the last success; each pause doubles the previous one.
    trips                 int NOT NULL DEFAULT 0,
    open_until            timestamptz,
    probe_until           timestamptz,
    last_error            text,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
