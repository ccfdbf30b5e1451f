-- Each local classifier's training window (issue 39, item 6): the span of production data its
-- database sources could read (`results:DAYS`, `feedback:DAYS`), from the training's first read
-- back DAYS days (the largest) to when it was stored; NULL for a classifier trained from
-- labelled sets only, which read no ticket. `triage models --json` shows it; the erasure report
-- (`local_model_ticket`, V29) names the classifiers that learnt from an erased ticket, and
-- `triage models retire VERSION` removes one (its `local_model_ticket` rows cascade).
-- Nullable columns with no default: no rewrite.
ALTER TABLE local_model ADD COLUMN trained_from timestamptz;
ALTER TABLE local_model ADD COLUMN trained_until timestamptz;

-- Classifiers stored before: the window their sources name, ending when they were stored (their
-- reads ended moments before). A small table: one row per classifier.
UPDATE local_model m
SET trained_from = m.created_at - make_interval(days => w.days),
    trained_until = m.created_at
FROM (
    SELECT l.version, max(substring(s->>'source' FROM '^(?:results|feedback):(\d+)$')::int) AS days
    FROM local_model l, jsonb_array_elements(l.sources) s
    WHERE s->>'source' ~ '^(results|feedback):\d+$'
    GROUP BY l.version
) w
WHERE m.version = w.version;

ALTER TABLE local_model ADD CONSTRAINT local_model_window
    CHECK ((trained_from IS NULL) = (trained_until IS NULL) AND trained_from <= trained_until);
