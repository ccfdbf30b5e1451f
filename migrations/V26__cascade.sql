-- The cascade (docs/cascade.md): local classifiers trained by the project, which stage
-- answered each result, and provisional answers while the large model is away.

-- A trained classifier, by content: `version` is `local-` + the artefact's digest, so every
-- function loads the same one by the name a cascade's model version gives (cached per
-- process). `sources` says what trained it (sets, days of results, days of feedback, rows).
CREATE TABLE local_model (
    version      text PRIMARY KEY,
    artefact     bytea NOT NULL,
    departments  text[] NOT NULL,
    examples     int NOT NULL,
    sources      jsonb NOT NULL,
    trained_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Which stage of a cascade answered: the local classifier or the model called. A constant
-- default adds the column without rewriting the table; the check is not validated against
-- the rows already there (all 'model'), so no scan under the lock either.
ALTER TABLE evaluation_result ADD COLUMN answered_by text NOT NULL DEFAULT 'model';
ALTER TABLE evaluation_result ADD CONSTRAINT evaluation_result_answered_by
    CHECK (answered_by IN ('local', 'model')) NOT VALID;

-- The local answer given while a new ticket's evaluation cannot be made now (the breaker is
-- open, the day's budget is spent, or it has waited longer than
-- TRIAGE_PROVISIONAL_AFTER_SECONDS). Apart from `evaluation_result` on purpose: a provisional
-- answer never dedups a paid call and never counts as done. One per content key, so it is
-- given (and announced) once; kept after the final answer, which the read side prefers, so
-- its event can still be delivered. Erasing its ticket erases it.
CREATE TABLE provisional_result (
    idempotency_key  text PRIMARY KEY,
    ticket_id        uuid NOT NULL REFERENCES ticket (id) ON DELETE CASCADE,
    is_urgent        double precision NOT NULL,
    department       text NOT NULL,
    urgency_score    double precision NOT NULL,
    confidence       double precision NOT NULL,
    -- The job's versions (the cascade's model version).
    model_version    text NOT NULL,
    prompt_version   text NOT NULL,
    policy_version   text NOT NULL,
    reason           text NOT NULL CHECK (reason IN ('breaker_open', 'budget_spent', 'waiting')),
    computed_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_provisional_result_ticket ON provisional_result (ticket_id);

-- `triage eval --thresholds`: a cascade's threshold swept on a set's dev split (accuracy, the
-- share answered locally and the cost at each threshold), which the Quality page draws.
CREATE TABLE threshold_sweep (
    id              bigserial PRIMARY KEY,
    -- The cascade swept (the threshold it names is one point of many).
    prompt_version  text NOT NULL,
    model_version   text NOT NULL,
    set_digest      text NOT NULL,
    split           text NOT NULL,
    -- [{"threshold", "n", "local_share", "department_accuracy", "cost_per_ticket_usd",
    --   "cost_per_correct_usd"}, ...]
    points          jsonb NOT NULL,
    run_by          text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- A delivery of a provisional answer: its body is read from `provisional_result`.
ALTER TABLE delivery ADD COLUMN provisional boolean NOT NULL DEFAULT false;

-- The API's read side shows a provisional answer (`grant_api_role()`, V25, with it).
CREATE OR REPLACE FUNCTION grant_api_role() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'triage_api') THEN
        RETURN;
    END IF;
    GRANT SELECT, INSERT ON ticket, ticket_evaluation, evaluation_outbox, request_idempotency,
        caller_daily_tickets, delivery TO triage_api;
    -- A request key past its expiry is taken over; the day's count goes up.
    GRANT UPDATE ON request_idempotency, caller_daily_tickets TO triage_api;
    GRANT SELECT ON evaluation_result, version_promotion, provisional_result TO triage_api;
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

-- The deliverer reads a provisional answer's body (`grant_deliver_role()`, V23, with it).
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
    -- The event's body (its evaluated_at is clamped to the ticket's creation), final or
    -- provisional.
    GRANT SELECT ON evaluation_result, provisional_result TO triage_deliver;
    GRANT SELECT (id, subject, message, created_at) ON ticket TO triage_deliver;
    -- Whether an operator paused deliveries.
    GRANT SELECT ON pause TO triage_deliver;
END
$$;
SELECT grant_deliver_role();
