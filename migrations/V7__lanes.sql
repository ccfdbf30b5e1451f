-- One queue, many kinds of work (River's `queue`, Oban's `queue`: columns, not new tables).
-- Every job, ticket and ledger row says which lane it runs in and whose work it is, so the
-- claim can serve new tickets first and the reports can keep eval work apart.
--
-- lane: 'interactive' (a ticket just ingested) or 'bulk' (reprocess, redrive, eval,
--       backfill: work that may wait, and may use the providers' cheaper tiers).
-- workload: 'production' or 'eval' (`triage eval` runs through the same pipeline, but never
--       shows in production counts, alarms, the age metric or the console's queue).
-- Both are metadata-only additions (a constant default), so a running fleet is not blocked.

ALTER TABLE evaluation_outbox
    ADD COLUMN lane text NOT NULL DEFAULT 'interactive' CHECK (lane IN ('interactive', 'bulk')),
    ADD COLUMN workload text NOT NULL DEFAULT 'production' CHECK (workload IN ('production', 'eval'));

ALTER TABLE ticket
    ADD COLUMN workload text NOT NULL DEFAULT 'production' CHECK (workload IN ('production', 'eval'));

ALTER TABLE provider_call
    ADD COLUMN lane text NOT NULL DEFAULT 'interactive' CHECK (lane IN ('interactive', 'bulk')),
    ADD COLUMN workload text NOT NULL DEFAULT 'production' CHECK (workload IN ('production', 'eval'));
