-- Security round 2 (docs/runbook.md "Security"): who owns a ticket, a per-caller daily
-- quota, an append-only audit trail, and the API role's grants in one place.

-- The owner of a ticket: the digest of the principal that created it (`http::Caller::owner`,
-- 32 hex digits) or 'local' (the local server). Another caller gets a 404. NULL: created
-- before this migration, owner unknown: only a caller with the read-all scope reads those.
-- Metadata-only (no default), so a running fleet is not blocked.
ALTER TABLE ticket ADD COLUMN owner text;

-- Tickets each owner created per UTC day, counted at ingest in the ticket's transaction
-- (TRIAGE_CALLER_DAILY_TICKETS), so the quota holds across API instances. One row per owner
-- and day.
CREATE TABLE caller_daily_tickets (
    owner    text NOT NULL,
    day      date NOT NULL,
    tickets  integer NOT NULL,
    PRIMARY KEY (owner, day)
);

-- The audit trail: a row is written 'started' before the operation and finished once after
-- it; it is never changed again nor deleted, and `db_login` and `at` are the server's.
ALTER TABLE operation_audit DROP CONSTRAINT operation_audit_status_check;
ALTER TABLE operation_audit
    ADD CONSTRAINT operation_audit_status_check
        CHECK (status IN ('started', 'ok', 'refused', 'failed')),
    ADD COLUMN finished_at timestamptz;

CREATE FUNCTION operation_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.db_login := session_user;
        NEW.at := now();
        NEW.finished_at := CASE WHEN NEW.status = 'started' THEN NULL ELSE now() END;
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status = 'started' AND NEW.status <> 'started'
       AND (NEW.id, NEW.at, NEW.principal, NEW.db_login, NEW.op, NEW.parameters)
           IS NOT DISTINCT FROM (OLD.id, OLD.at, OLD.principal, OLD.db_login, OLD.op, OLD.parameters)
    THEN
        NEW.finished_at := now();
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'operation_audit is append-only: a started row is finished once, no row is changed or deleted'
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER operation_audit_append_only
    BEFORE INSERT OR UPDATE OR DELETE ON operation_audit
    FOR EACH ROW EXECUTE FUNCTION operation_audit_append_only();
CREATE TRIGGER operation_audit_no_truncate
    BEFORE TRUNCATE ON operation_audit
    FOR EACH STATEMENT EXECUTE FUNCTION operation_audit_append_only();

-- What the API's least-privilege role may do, in one place: called here, by docs/sql/roles.sql
-- (which creates the role and its login), and replaced and called again by any later
-- migration that gives the API a table. Nothing when the role does not exist. (CONNECT and
-- the schema's USAGE belong to the database's owner: roles.sql grants them.)
CREATE OR REPLACE FUNCTION grant_api_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        RETURN;
    END IF;
    GRANT SELECT, INSERT ON ticket, ticket_evaluation, evaluation_outbox, request_idempotency,
        caller_daily_tickets TO triage_api;
    -- A request key past its expiry is taken over; the day's count goes up.
    GRANT UPDATE ON request_idempotency, caller_daily_tickets TO triage_api;
    GRANT SELECT ON evaluation_result, version_promotion TO triage_api;
    GRANT USAGE ON SEQUENCE evaluation_outbox_id_seq TO triage_api;
END
$$;
SELECT grant_api_role();
