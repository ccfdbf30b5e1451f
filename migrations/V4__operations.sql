-- Operations (docs/runbook.md): which version readers see, which text each prompt version
-- stands for, and what reprocess pages through.

-- Promotions: the newest row is the version `GET /tickets/{id}` shows. Earlier rows stay as
-- the history, so every promotion can be traced and undone by promoting the previous one.
CREATE TABLE version_promotion (
    id              bigserial PRIMARY KEY,
    prompt_version  text NOT NULL,
    model_version   text NOT NULL,
    promoted_at     timestamptz NOT NULL DEFAULT now()
);

-- The text behind each prompt version, from the first worker that carried it. A cached result
-- answers the text its key's version stood for, so the text must never change under a version.
CREATE TABLE prompt_registry (
    prompt_version  text PRIMARY KEY,
    sha256          text NOT NULL,
    first_seen      timestamptz NOT NULL DEFAULT now()
);

-- Reprocess walks tickets in keyset order. Built without CONCURRENTLY (migrations run in a
-- transaction): it blocks ingest for the seconds the build takes on a large table.
CREATE INDEX idx_ticket_created ON ticket (created_at, id);
