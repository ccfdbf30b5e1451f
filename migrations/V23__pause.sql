-- An operator's pause (`triage pause`, the ops Lambda, the console): a row per paused lane,
-- read by the worker and the deliverer at the start of each invocation, so a pause takes
-- effect within one schedule tick and needs no deploy. `interactive` and `bulk` are the
-- evaluation outbox's lanes, `deliveries` the delivery outbox. Who paused and why are kept
-- here for the console; the audit trail keeps the history.
CREATE TABLE pause (
    lane      text PRIMARY KEY CHECK (lane IN ('interactive', 'bulk', 'deliveries')),
    paused_at timestamptz NOT NULL DEFAULT now(),
    paused_by text NOT NULL,
    reason    text
);

-- The deliverer reads whether deliveries are paused (`grant_deliver_role()`, V21, with this).
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
    -- Whether an operator paused deliveries.
    GRANT SELECT ON pause TO triage_deliver;
END
$$;
SELECT grant_deliver_role();
