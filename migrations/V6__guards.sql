-- Guards (docs/runbook.md "Guards"): erasure needs to find every ticket of a content, and
-- operator commands leave an audit trail.

-- Erasure keeps a result while another ticket still refers to its content key, and deletes it
-- (with its job and ledger rows) once none does: both questions are asked by key.
CREATE INDEX idx_ticket_evaluation_key ON ticket_evaluation (idempotency_key);
-- Erasure forgets the request keys that answered with an erased ticket.
CREATE INDEX idx_request_idempotency_ticket ON request_idempotency (ticket_id);

-- Every operator command, from the CLI or the ops Lambda: who ran it, what, with which
-- parameters, and what it did (or why it was refused). Rows are only ever inserted.
CREATE TABLE operation_audit (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    -- `os-user alice@host` (CLI, as its environment says) or `lambda arn:... request <id>`
    -- (ops Lambda).
    principal   text NOT NULL,
    -- The database login that wrote the row: set by the server, whatever the client claims.
    db_login    text NOT NULL DEFAULT session_user,
    op          text NOT NULL,
    parameters  jsonb NOT NULL,
    -- 'ok', 'refused' (bad input, a missing --confirm) or 'failed'.
    status      text NOT NULL CHECK (status IN ('ok', 'refused', 'failed')),
    -- What it did, as the command reported it; NULL when it did not finish.
    result      jsonb,
    error       text
);
CREATE INDEX idx_operation_audit_at ON operation_audit (at);

-- Least privilege for the API (docs/runbook.md "A database role for the API"): a NOLOGIN
-- group role with what ingest and the read side need, nothing else: no DELETE, no DDL, no
-- UPDATE but on request keys (a key past its expiry is taken over). A login made a member of
-- it (`CREATE ROLE triage_api_login LOGIN PASSWORD '…' IN ROLE triage_api`), stored in its own
-- secret (template parameter ApiDbSecretArn), is the API's. Roles belong to the cluster, so
-- this only creates it when missing, and skips with a notice when the migrating login may not
-- create roles (the functions then keep sharing the one login). A later migration that gives
-- the API another table grants it to triage_api.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        BEGIN
            CREATE ROLE triage_api NOLOGIN;
        EXCEPTION
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'triage_api not created: this login may not create roles';
                RETURN;
            -- Another database of the cluster migrating at the same moment created it.
            WHEN duplicate_object OR unique_violation THEN NULL;
        END;
    END IF;
    GRANT SELECT, INSERT ON ticket, ticket_evaluation, evaluation_outbox, request_idempotency
        TO triage_api;
    GRANT UPDATE ON request_idempotency TO triage_api;
    GRANT SELECT ON evaluation_result, version_promotion TO triage_api;
    GRANT USAGE ON SEQUENCE evaluation_outbox_id_seq TO triage_api;
END
$$;
