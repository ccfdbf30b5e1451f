-- The help desk's feedback (`POST /tickets/{id}/feedback`, the ops Lambda's `feedback`): the
-- labels an agent settled on for a ticket. A later one replaces it (`superseded_at`), the
-- history stays; erasing the ticket erases its feedback (ON DELETE CASCADE).
CREATE TABLE ticket_feedback (
    id            bigserial PRIMARY KEY,
    ticket_id     uuid NOT NULL REFERENCES ticket (id) ON DELETE CASCADE,
    department    text NOT NULL,
    is_urgent     boolean NOT NULL,
    given_by      text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    superseded_at timestamptz
);
CREATE UNIQUE INDEX idx_ticket_feedback_current ON ticket_feedback (ticket_id)
    WHERE superseded_at IS NULL;

-- What the current feedback says of each version's answer for the ticket when it was given:
-- one row per (feedback, version). Deleted when the feedback is superseded or erased.
CREATE TABLE feedback_match (
    feedback_id       bigint NOT NULL REFERENCES ticket_feedback (id) ON DELETE CASCADE,
    prompt_version    text NOT NULL,
    model_version     text NOT NULL,
    day               date NOT NULL,
    department_agrees boolean NOT NULL,
    predicted_urgent  boolean NOT NULL,
    desk_urgent       boolean NOT NULL,
    PRIMARY KEY (feedback_id, prompt_version, model_version)
);

-- Agreement's running totals per UTC day and version, kept by a trigger on `feedback_match`
-- by each row's difference (as `provider_call_hour`, V9): `triage stats`, the console and the
-- sweeper's metric read a few rows, never the feedback.
CREATE TABLE feedback_agreement_day (
    day               date NOT NULL,
    prompt_version    text NOT NULL,
    model_version     text NOT NULL,
    n                 bigint NOT NULL DEFAULT 0,
    department_agrees bigint NOT NULL DEFAULT 0,
    urgent_tp         bigint NOT NULL DEFAULT 0,
    urgent_fp         bigint NOT NULL DEFAULT 0,
    urgent_fn         bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (day, prompt_version, model_version)
);

CREATE OR REPLACE FUNCTION feedback_agreement_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    m feedback_match;
    sign int;
BEGIN
    IF TG_OP = 'INSERT' THEN m := NEW; sign := 1; ELSE m := OLD; sign := -1; END IF;
    INSERT INTO feedback_agreement_day AS t
        (day, prompt_version, model_version, n, department_agrees, urgent_tp, urgent_fp, urgent_fn)
    VALUES (m.day, m.prompt_version, m.model_version, sign,
            sign * m.department_agrees::int,
            sign * (m.predicted_urgent AND m.desk_urgent)::int,
            sign * (m.predicted_urgent AND NOT m.desk_urgent)::int,
            sign * (NOT m.predicted_urgent AND m.desk_urgent)::int)
    ON CONFLICT (day, prompt_version, model_version) DO UPDATE SET
        n = t.n + EXCLUDED.n,
        department_agrees = t.department_agrees + EXCLUDED.department_agrees,
        urgent_tp = t.urgent_tp + EXCLUDED.urgent_tp,
        urgent_fp = t.urgent_fp + EXCLUDED.urgent_fp,
        urgent_fn = t.urgent_fn + EXCLUDED.urgent_fn;
    RETURN NULL;
END
$$;
CREATE TRIGGER feedback_agreement_count AFTER INSERT OR DELETE ON feedback_match
    FOR EACH ROW EXECUTE FUNCTION feedback_agreement_count();

-- The API takes feedback: `grant_api_role()` (V8, V11) is the one list of what its role may
-- do, replaced with the feedback tables added and run again.
CREATE OR REPLACE FUNCTION grant_api_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        RETURN;
    END IF;
    GRANT SELECT, INSERT ON ticket, ticket_evaluation, evaluation_outbox, request_idempotency,
        caller_daily_tickets, delivery TO triage_api;
    -- A request key past its expiry is taken over; the day's count goes up.
    GRANT UPDATE ON request_idempotency, caller_daily_tickets TO triage_api;
    GRANT SELECT ON evaluation_result, version_promotion TO triage_api;
    GRANT SELECT, INSERT, UPDATE, DELETE ON subscription TO triage_api;
    GRANT USAGE ON SEQUENCE evaluation_outbox_id_seq, delivery_id_seq TO triage_api;
    -- Feedback: a new one supersedes the current one, whose matches go (and with them its
    -- share of the running totals, which the trigger keeps).
    GRANT SELECT, INSERT ON ticket_feedback TO triage_api;
    GRANT UPDATE (superseded_at) ON ticket_feedback TO triage_api;
    GRANT SELECT, INSERT, DELETE ON feedback_match TO triage_api;
    GRANT SELECT, INSERT, UPDATE ON feedback_agreement_day TO triage_api;
    GRANT USAGE ON SEQUENCE ticket_feedback_id_seq TO triage_api;
END
$$;
SELECT grant_api_role();
