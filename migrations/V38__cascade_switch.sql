-- The cascade kept fresh (issue 39, item 3; docs/cascade.md "Kept fresh"): a configured
-- cascade answers new tickets with the classifier switched to last, if any; `triage retrain`
-- switches when its candidate passes the gate, `triage models switch` by hand (a rollback).
-- History kept: the newest row is the live one. Who and why, for the audit's reader.
CREATE TABLE cascade_switch (
    id bigserial PRIMARY KEY,
    local_version text NOT NULL,
    switched_at timestamptz NOT NULL DEFAULT now(),
    switched_by text NOT NULL,
    reason text NOT NULL
);
