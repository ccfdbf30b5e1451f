-- An eval run asked for and not yet concluded (`triage eval`, the ops Lambda's `eval`): what
-- it needs to be scored later by whoever finds every job answered (the waiting CLI, the
-- sweeper's tick, `triage eval --list`), so the ops request returns at once and the deployed
-- workers answer its jobs in the bulk lane. `plan` holds each row's id, ticket and labels and
-- each version's content keys (never ticket text: that is in `ticket`, workload 'eval'). A
-- concluded run's figures are in `eval_run`; `concluded_at` marks it, once.
CREATE TABLE eval_request (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    set_digest     text NOT NULL,
    set_source     text NOT NULL,
    split          text CHECK (split IN ('dev', 'test')),
    policy_version text NOT NULL,
    plan           jsonb NOT NULL,
    operator       text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    concluded_at   timestamptz
);
CREATE INDEX idx_eval_request_running ON eval_request (started_at) WHERE concluded_at IS NULL;
