-- Retention deletes finished jobs in small batches, oldest first; results are kept, so a
-- duplicate arriving later is still a dedup hit.
CREATE INDEX idx_outbox_done ON evaluation_outbox (finished_at) WHERE status = 'done';

-- The outbox is a queue: rows are updated several times and then deleted. Vacuum it early
-- and often so dead tuples don't slow the claim's index scan.
ALTER TABLE evaluation_outbox SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1,
    fillfactor = 80
);
