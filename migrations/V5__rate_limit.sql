-- The provider's rate limit, shared by every worker (docs/scaling.md): one row per provider,
-- taken in one statement before each call (GCRA: a theoretical arrival time per budget).

CREATE TABLE provider_rate_limit (
    provider     text PRIMARY KEY,
    -- The budget is spent up to these instants; a call may start while they are less than
    -- one second's share ahead of now.
    request_tat  timestamptz NOT NULL DEFAULT now(),
    token_tat    timestamptz NOT NULL DEFAULT now(),
    -- No call starts before this: a 429's Retry-After, or a reset header with nothing left.
    held_until   timestamptz NOT NULL DEFAULT '-infinity',
    updated_at   timestamptz NOT NULL DEFAULT now()
);
