-- A ticket whose content another principal sent first is held: shown pending, and its
-- events not delivered, until `held_until`, so that dedup tells its sender nothing
-- (docs/dedup.md). NULL: not held. Additive: a nullable column without a default, no rewrite.
ALTER TABLE ticket ADD COLUMN held_until timestamptz;
