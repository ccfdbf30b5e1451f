-- A target, not a threshold (issue 39, item 2; docs/cascade.md): the thresholds that keep a
-- target precision, derived per department by cross-fitting on a classifier's own examples
-- (`triage train --precision P`), stored with the classifier they were derived for and named by
-- a cascade as `cascade(local-…,pP,MODEL@EFFORT)`. `derived` holds the thresholds, what they
-- keep out of fold and the risk–coverage curve. Derived from the same examples they are the
-- same, so a row never changes; it goes when its classifier is retired.
CREATE TABLE local_model_target (
    version     text NOT NULL REFERENCES local_model (version) ON DELETE CASCADE,
    target      double precision NOT NULL CHECK (target > 0 AND target <= 1),
    derived     jsonb NOT NULL,
    derived_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (version, target)
);

-- Judged as production runs (issue 39, item 1; docs/quality.md): each `triage eval --by-time`,
-- the cascade trained on the traffic before `split_at` and judged on the tickets after it,
-- beside the large model's stored answers. The Quality page leads with the newest.
CREATE TABLE time_split_run (
    id              bigserial PRIMARY KEY,
    split_at        timestamptz NOT NULL,
    until           timestamptz NOT NULL,
    prompt_version  text NOT NULL,
    model_version   text NOT NULL,
    policy_version  text NOT NULL,
    report          jsonb NOT NULL,
    run_by          text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_time_split_run_newest ON time_split_run (policy_version, created_at DESC);
