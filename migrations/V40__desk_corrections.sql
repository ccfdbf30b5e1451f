-- Desk corrections that mean what they say (issue 49 item 5; docs/zendesk.md, "What counts as
-- a correction"): a help desk's event labels only the field it changed, so a label may carry
-- one field and not the other (NULL: no label for that field, never a default); events apply
-- in the order of their event time; a correction that arrives before the write-back is kept
-- until the answer is written. Additive: the previous release writes both fields, as before.

-- A label of one field: the other is the ticket's earlier desk label's, or NULL when the desk
-- never labelled it. Not validated against the rows already there (all carry both).
ALTER TABLE ticket_feedback ALTER COLUMN department DROP NOT NULL;
ALTER TABLE ticket_feedback ALTER COLUMN is_urgent DROP NOT NULL;
ALTER TABLE ticket_feedback ADD CONSTRAINT ticket_feedback_some_label
    CHECK (department IS NOT NULL OR is_urgent IS NOT NULL) NOT VALID;

-- A match says nothing of a field the label lacks.
ALTER TABLE feedback_match ALTER COLUMN department_agrees DROP NOT NULL;
ALTER TABLE feedback_match ALTER COLUMN desk_urgent DROP NOT NULL;

-- The running totals (V25) count a field only where the label has it: `n` is the department's
-- count (its accuracy's denominator), the urgent counts only labelled urgency.
CREATE OR REPLACE FUNCTION feedback_agreement_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    m feedback_match;
    sign int;
BEGIN
    IF TG_OP = 'INSERT' THEN m := NEW; sign := 1; ELSE m := OLD; sign := -1; END IF;
    INSERT INTO feedback_agreement_day AS t
        (day, prompt_version, model_version, n, department_agrees, urgent_tp, urgent_fp, urgent_fn)
    VALUES (m.day, m.prompt_version, m.model_version,
            sign * (m.department_agrees IS NOT NULL)::int,
            sign * coalesce(m.department_agrees::int, 0),
            sign * coalesce((m.predicted_urgent AND m.desk_urgent)::int, 0),
            sign * coalesce((m.predicted_urgent AND NOT m.desk_urgent)::int, 0),
            sign * coalesce((NOT m.predicted_urgent AND m.desk_urgent)::int, 0))
    ON CONFLICT (day, prompt_version, model_version) DO UPDATE SET
        n = t.n + EXCLUDED.n,
        department_agrees = t.department_agrees + EXCLUDED.department_agrees,
        urgent_tp = t.urgent_tp + EXCLUDED.urgent_tp,
        urgent_fp = t.urgent_fp + EXCLUDED.urgent_fp,
        urgent_fn = t.urgent_fn + EXCLUDED.urgent_fn;
    RETURN NULL;
END
$$;

-- The event time of the last change applied per field: an older event for the field, arriving
-- later, changes nothing (Zendesk delivers webhooks in no guaranteed order).
ALTER TABLE zendesk_ticket ADD COLUMN group_changed_at timestamptz;
ALTER TABLE zendesk_ticket ADD COLUMN priority_changed_at timestamptz;

-- A human agent's change that arrived before triage's answer was written back: kept, and
-- applied by the write-back once it has written (in event time order). No ticket text.
CREATE TABLE zendesk_correction (
    event_id     text PRIMARY KEY,
    account_id   bigint NOT NULL,
    zendesk_id   bigint NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('group', 'priority')),
    actor_id     bigint NOT NULL,
    group_id     bigint,
    priority     text,
    event_at     timestamptz NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (account_id, zendesk_id) REFERENCES zendesk_ticket ON DELETE CASCADE
);
CREATE INDEX idx_zendesk_correction_ticket ON zendesk_correction (account_id, zendesk_id, event_at);

-- The API keeps early corrections (`grant_api_role()`, V38, with it added).
CREATE OR REPLACE FUNCTION grant_api_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        RETURN;
    END IF;
    GRANT SELECT, INSERT ON ticket, ticket_evaluation, evaluation_outbox, request_idempotency,
        caller_daily_tickets, caller_minute_requests, delivery TO triage_api;
    GRANT UPDATE ON request_idempotency, caller_daily_tickets, caller_minute_requests TO triage_api;
    GRANT SELECT ON evaluation_result, version_promotion, provisional_result TO triage_api;
    GRANT SELECT, INSERT, UPDATE, DELETE ON subscription TO triage_api;
    GRANT USAGE ON SEQUENCE evaluation_outbox_id_seq, delivery_id_seq TO triage_api;
    GRANT SELECT, INSERT, DELETE ON ticket_feedback TO triage_api;
    GRANT UPDATE (superseded_at) ON ticket_feedback TO triage_api;
    GRANT SELECT, INSERT, DELETE ON feedback_match TO triage_api;
    GRANT SELECT, INSERT, UPDATE ON feedback_agreement_day TO triage_api;
    GRANT USAGE ON SEQUENCE ticket_feedback_id_seq TO triage_api;
    GRANT SELECT, INSERT, UPDATE ON zendesk_ticket TO triage_api;
    GRANT SELECT, INSERT ON zendesk_event TO triage_api;
    GRANT SELECT ON zendesk_account, taxonomy TO triage_api;
    GRANT SELECT ON cascade_switch TO triage_api;
    -- A correction before the write-back is kept (V40).
    GRANT SELECT, INSERT ON zendesk_correction TO triage_api;
END
$$;
SELECT grant_api_role();

-- The deliverer applies the corrections kept for a ticket once it has written the answer
-- (`grant_deliver_role()`, V32, with the feedback tables added: what `feedback::give` uses).
CREATE OR REPLACE FUNCTION grant_deliver_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_deliver') THEN
        RETURN;
    END IF;
    GRANT SELECT, UPDATE ON delivery TO triage_deliver;
    GRANT SELECT, INSERT ON subscription TO triage_deliver;
    GRANT UPDATE (failing_since, disabled_at, disabled_reason) ON subscription TO triage_deliver;
    GRANT SELECT ON evaluation_result, provisional_result TO triage_deliver;
    GRANT SELECT (id, subject, message, created_at, held_until, workload) ON ticket
        TO triage_deliver;
    GRANT SELECT ON pause TO triage_deliver;
    GRANT SELECT, UPDATE ON zendesk_ticket TO triage_deliver;
    GRANT SELECT, INSERT, UPDATE ON zendesk_account TO triage_deliver;
    GRANT SELECT ON taxonomy TO triage_deliver;
    GRANT SELECT, INSERT, UPDATE ON provider_rate_limit TO triage_deliver;
    -- The kept corrections, applied as the desk's feedback (V40).
    GRANT SELECT, DELETE ON zendesk_correction TO triage_deliver;
    GRANT SELECT, INSERT ON zendesk_event TO triage_deliver;
    GRANT SELECT ON ticket_evaluation TO triage_deliver;
    GRANT SELECT, INSERT, DELETE ON ticket_feedback TO triage_deliver;
    GRANT UPDATE (superseded_at) ON ticket_feedback TO triage_deliver;
    GRANT SELECT, INSERT, DELETE ON feedback_match TO triage_deliver;
    GRANT SELECT, INSERT, UPDATE ON feedback_agreement_day TO triage_deliver;
    GRANT USAGE ON SEQUENCE ticket_feedback_id_seq TO triage_deliver;
END
$$;
SELECT grant_deliver_role();
