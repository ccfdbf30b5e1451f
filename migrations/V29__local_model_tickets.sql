-- Which production tickets trained each local classifier (`results:DAYS` and `feedback:DAYS`
-- read them; a labelled set's rows are no tickets), so that erasing a ticket can say which
-- classifiers learnt from its text (`pipeline::cascade::trained_on`, docs/cascade.md). Erasure
-- removes the ticket's rows here and counts them on the classifier (`erased_tickets`): the
-- artefact still holds what it learnt until it is retired.
CREATE TABLE local_model_ticket (
    ticket_id  uuid NOT NULL,
    version    text NOT NULL REFERENCES local_model (version) ON DELETE CASCADE,
    PRIMARY KEY (ticket_id, version)
);
CREATE INDEX idx_local_model_ticket_version ON local_model_ticket (version);

-- Classifiers stored before V29 recorded no ticket: `tickets_recorded` false, and an erasure
-- lists them as "may have trained on it" when they were trained from the database after the
-- ticket was created. Constant defaults: no rewrite.
ALTER TABLE local_model ADD COLUMN tickets_recorded boolean NOT NULL DEFAULT false;
ALTER TABLE local_model ADD COLUMN erased_tickets integer NOT NULL DEFAULT 0;
