-- Leases that follow the work (issue 43, docs/fencing.md "Leases that follow the work"): a
-- claim's lease is short and the invocation holding the job renews it, so a crashed
-- invocation's jobs come back within one lease instead of a worst-case call. `leased_at` is
-- when the lease was last taken or renewed: a lease that was running when the server
-- (re)started could not be renewed while the server was away, so it runs again, for its own
-- length, from the server's start (`outbox::lease`'s return of expired leases). NULL for rows
-- leased by a release before this one: their lease counts as it always did.
-- Nullable without a default: no table rewrite.
ALTER TABLE evaluation_outbox ADD COLUMN leased_at timestamptz;
ALTER TABLE delivery ADD COLUMN leased_at timestamptz;
