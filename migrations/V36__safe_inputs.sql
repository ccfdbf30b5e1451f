-- Safe inputs (issue 39, item 5; docs/labelling.md): feedback trains and judges only when its
-- giver may label (`TRIAGE_LABELLERS`, the JWT scope `triage/label`, the Zendesk connector,
-- operators). Feedback from anyone else is still stored (the route's 2xx is fixed) but marked,
-- and never trains a classifier, feeds `eval --set feedback`, the agreement figures or the gate.
-- Labels given before this migration were accepted as the desk's and keep counting (the
-- CHANGELOG's upgrade note has the SQL to stop counting them). A constant default: no
-- rewrite. Then the default becomes false: the previous release, still running while this
-- one deploys, inserts without the column, and what does not say it is a labeller's is not.
ALTER TABLE ticket_feedback ADD COLUMN labeller boolean NOT NULL DEFAULT true;
ALTER TABLE ticket_feedback ALTER COLUMN labeller SET DEFAULT false;

-- A ticket's current label is one per kind of giver: a caller who may not label relabelling
-- its own ticket supersedes only its own earlier label, never the desk's (nor its matches,
-- and so the agreement figures).
DROP INDEX idx_ticket_feedback_current;
CREATE UNIQUE INDEX idx_ticket_feedback_current ON ticket_feedback (ticket_id, labeller)
    WHERE superseded_at IS NULL;

-- What each classifier learnt from, per database source: its window in days, the owner cap
-- applied, and how many examples each giver and each ticket owner gave
-- (`[{"source", "days", "examples", "owner_cap", "givers": {..}, "owners": {..}}]`).
-- `triage models --json` shows it; NULL for classifiers stored before.
ALTER TABLE local_model ADD COLUMN provenance jsonb;
