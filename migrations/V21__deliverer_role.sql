-- Least privilege for the deliverer, the process that calls customers' URLs: the NOLOGIN group
-- role `triage_deliver` (created by docs/sql/roles.sql with its login, template parameter
-- DelivererDbSecretArn) reads what a delivery needs and changes only deliveries and its
-- endpoints' health, never results, the ledger, the outbox or tickets. The one list of what it
-- may do, in the manner of `grant_api_role()` (V8): called here, by roles.sql for tables that
-- already exist, and replaced and called again by any later migration that changes it.
-- Nothing when the role does not exist.
CREATE OR REPLACE FUNCTION grant_deliver_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_deliver') THEN
        RETURN;
    END IF;
    -- The claim, the fenced outcome and the expired-lease sweep.
    GRANT SELECT, UPDATE ON delivery TO triage_deliver;
    -- The endpoint and its secret; the bus's subscription, made once by the deliverer that
    -- has it; the endpoint's health (failing since, disabled).
    GRANT SELECT, INSERT ON subscription TO triage_deliver;
    GRANT UPDATE (failing_since, disabled_at, disabled_reason) ON subscription TO triage_deliver;
    -- The event's body (its evaluated_at is clamped to the ticket's creation).
    GRANT SELECT ON evaluation_result TO triage_deliver;
    GRANT SELECT (id, subject, message, created_at) ON ticket TO triage_deliver;
END
$$;
SELECT grant_deliver_role();
