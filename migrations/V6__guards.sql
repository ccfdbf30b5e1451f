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
    -- `os-user alice@host` (CLI) or `lambda arn:... request <id>` (ops Lambda).
    principal   text NOT NULL,
    op          text NOT NULL,
    parameters  jsonb NOT NULL,
    -- 'ok', 'refused' (bad input, a missing --confirm) or 'failed'.
    status      text NOT NULL CHECK (status IN ('ok', 'refused', 'failed')),
    -- What it did, as the command reported it; NULL when it did not finish.
    result      jsonb,
    error       text
);
CREATE INDEX idx_operation_audit_at ON operation_audit (at);
