-- A ticket whose content another principal sent first is held: shown pending, and its
-- events not delivered, until `held_until`, so that dedup tells its sender nothing
-- (docs/dedup.md). NULL: not held. Additive: a nullable column without a default, no rewrite.
ALTER TABLE ticket ADD COLUMN held_until timestamptz;

-- The deliverer reads when a held ticket's hold ended: its event's evaluated_at
-- (`grant_deliver_role()`, V26, with it).
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
    -- The event's body (its evaluated_at is clamped to the ticket's creation, or the end of
    -- its hold), final or provisional.
    GRANT SELECT ON evaluation_result, provisional_result TO triage_deliver;
    GRANT SELECT (id, subject, message, created_at, held_until) ON ticket TO triage_deliver;
    -- Whether an operator paused deliveries.
    GRANT SELECT ON pause TO triage_deliver;
END
$$;
SELECT grant_deliver_role();
