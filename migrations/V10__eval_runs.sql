-- `triage eval` (docs/quality.md): each finished run of one version over one split of a
-- labelled set. The set is named by its SHA-256 digest, so a run on an edited set never counts
-- for the promote gate of another. The tickets and jobs of a run are ordinary rows marked
-- workload = 'eval' (V7); this table keeps only what the run concluded.
CREATE TABLE eval_run (
    id              bigserial PRIMARY KEY,
    set_digest      text NOT NULL,
    split           text CHECK (split IN ('dev', 'test')),
    prompt_version  text NOT NULL,
    model_version   text NOT NULL,
    policy_version  text NOT NULL,
    n               integer NOT NULL,
    -- The figures as `triage eval --json` prints them for this version (accuracy, macro-F1,
    -- per class, confusion, urgency, calls, cost, latency, misclassified row ids).
    metrics         jsonb NOT NULL,
    -- Calls this run made (0 when every answer was already stored) and their cost.
    calls           integer NOT NULL,
    cost_usd        numeric NOT NULL,
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL DEFAULT now(),
    operator        text NOT NULL
);

-- The promote gate and the Quality page read the newest run of a version on a set and split.
CREATE INDEX idx_eval_run_version ON eval_run (set_digest, split, prompt_version, model_version, finished_at DESC);
