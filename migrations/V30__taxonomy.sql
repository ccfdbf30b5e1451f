-- A desk's taxonomies (docs/taxonomy.md): stored by `triage taxonomy add`, keyed by their
-- content's version (`<name>-<12 hex of the SHA-256 of the canonical form>`), never changed
-- once stored. `canonical` is the exact text the version hashes, so a reader can check it.
CREATE TABLE taxonomy (
    version      text PRIMARY KEY,
    name         text NOT NULL,
    canonical    text NOT NULL,
    departments  integer NOT NULL,
    added_at     timestamptz NOT NULL DEFAULT now()
);

-- Each job keeps the policy (built-in or a stored taxonomy) it was ingested under; jobs an
-- older build writes are the built-in policy's. A constant default: no rewrite.
ALTER TABLE evaluation_outbox ADD COLUMN policy_version text NOT NULL DEFAULT 'policy-v1';
