-- The cascade grades itself on a sample (issue 49; docs/cascade.md "The audit"): a share of
-- the tickets its classifier would answer locally, drawn at random, go to the large model as
-- well. The draw is recorded with what the classifier said, so the pair (classifier, model)
-- and any desk label are an unbiased sample of the live classifier's precision. Keyed like
-- the result it is paired with; erasure deletes both (pipeline::erase).
CREATE TABLE cascade_audit (
    idempotency_key text NOT NULL,
    model_version   text NOT NULL,
    department      text NOT NULL,
    is_urgent       boolean NOT NULL,
    confidence      double precision NOT NULL,
    -- The uniform draw below `share` that sent it to the model: its weight is 1 / share.
    draw            double precision NOT NULL,
    share           double precision NOT NULL CHECK (share > 0 AND share <= 1),
    drawn_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (idempotency_key, model_version)
);
CREATE INDEX idx_cascade_audit_window ON cascade_audit (model_version, drawn_at);

-- A cascade that stopped itself: its audited precision's upper bound fell below its target.
-- While a row is open (`resumed_at` null) its classifier answers nothing locally; the large
-- model answers every ticket. Ended by `triage cascade resume` (who, why, forced or not);
-- a switched classifier is another cascade version and starts unsuspended. History kept.
CREATE TABLE cascade_suspension (
    id            bigserial PRIMARY KEY,
    model_version text NOT NULL,
    suspended_at  timestamptz NOT NULL DEFAULT now(),
    reason        text NOT NULL,
    audited       bigint NOT NULL,
    correct       bigint NOT NULL,
    upper_bound   double precision NOT NULL,
    target        double precision NOT NULL,
    resumed_at    timestamptz,
    resumed_by    text,
    resume_reason text,
    forced        boolean
);
CREATE UNIQUE INDEX idx_cascade_suspension_open ON cascade_suspension (model_version)
    WHERE resumed_at IS NULL;

-- Every label says where it came from (issue 49, item 1): feedback is the desk's (an API
-- labeller or a desk connector's human actor). `audit` and `model` labels are read from the
-- audit sample and the results; the column lets a set built from production say which is
-- which for every row.
ALTER TABLE ticket_feedback ADD COLUMN source text NOT NULL DEFAULT 'desk'
    CHECK (source IN ('desk', 'audit', 'model'));
