//! Announcing a result: one delivery row per subscriber, inserted by the statement that stores
//! the result (or closes the job, or promotes a version), so an event exists exactly when its
//! result is committed: never for a result that rolled back, never lost after the commit.
//! With no subscription the inserts find nothing to join, so they cost an index probe and no
//! round trip. `ON CONFLICT DO NOTHING` on (subscription, event id) makes announcing twice
//! (a retried completion, a promote run again) add nothing.
//!
//! Who hears of a ticket: its owner's webhooks (`subscription.owner` = `ticket.owner`, both
//! the digest of the principal) and every EventBridge bus. Which results are announced: the
//! ticket's first evaluation (the one it was ingested under), and results of the promoted
//! version; a reprocess result under another version waits for its promotion
//! ([`announce_promoted`]). Eval work is never announced.
//!
//! The desk's Zendesk write-back hears of the first evaluation; of a promoted version's results
//! only when the desk asked (`triage promote --write-back`, `version_promotion.write_back`), as
//! deliveries `promoted`, which leave solved and closed tickets alone (docs/zendesk.md).

use deadpool_postgres::GenericClient;

use crate::domain::{error::Result, versions::VersionPair};

/// The event id of (ticket, result key), in SQL: the same on every retry and replay, so
/// consumers dedupe on it. Computed by `delivery_event_id` (migration V33), which ingest's
/// function calls too.
macro_rules! event_id {
    ($ticket:literal, $key:literal) => {
        concat!("delivery_event_id(", $ticket, ", ", $key, ")")
    };
}

/// Which subscriptions hear of ticket `t`.
macro_rules! subscribers_of_t {
    () => {
        "JOIN subscription s ON s.disabled_at IS NULL
             AND (s.kind = 'eventbridge' OR s.owner IS NOT DISTINCT FROM t.owner)"
    };
}

/// A CTE (`, announced AS (…)`) to append after a CTE named `$cte` that returns the
/// `idempotency_key` of each answer just stored: announces it to the subscribers of every
/// ticket of that content (duplicates share the key). `$event_key` is what the event id is
/// made of beside the ticket (a provisional answer's event is not its final one's);
/// `$provisional`, whether the delivery's body is read from `provisional_result`.
macro_rules! announce_from {
    ($cte:literal, $event_key:literal, $provisional:literal) => {
        concat!(
            r#", announced AS (
    INSERT INTO delivery (subscription_id, ticket_id, idempotency_key, event_id, provisional,
                          available_at, promoted)
    SELECT s.id, te.ticket_id, te.idempotency_key, "#,
            $crate::pipeline::outbox::announce::event_id!("te.ticket_id", $event_key),
            ", ",
            $provisional,
            r#", greatest(now(), t.held_until), NOT f.first
    FROM "#,
            $cte,
            r#" AS answered
    -- Key to links to tickets, each a lookup whatever the statistics say (OFFSET 0 keeps the
    -- planner from reordering them): with a fresh deployment's tables analyzed while empty, it
    -- scanned every ticket for each result stored (docs/database.md).
    CROSS JOIN LATERAL (
        SELECT ticket_id, idempotency_key, prompt_version, model_version, created_at
        FROM ticket_evaluation WHERE idempotency_key = answered.idempotency_key OFFSET 0) te
    CROSS JOIN LATERAL (
        SELECT owner, held_until FROM ticket
        WHERE id = te.ticket_id AND workload = 'production' OFFSET 0) t
    "#,
            $crate::pipeline::outbox::announce::subscribers_of_t!(),
            r#"
    CROSS JOIN LATERAL (
        SELECT NOT EXISTS (SELECT 1 FROM ticket_evaluation first
                           WHERE first.ticket_id = te.ticket_id
                             AND first.created_at < te.created_at) AS first) f
    LEFT JOIN LATERAL (
        SELECT prompt_version, model_version, write_back
        FROM version_promotion ORDER BY id DESC LIMIT 1) p ON true
    WHERE f.first
       OR ((te.prompt_version, te.model_version) = (p.prompt_version, p.model_version)
           AND (s.kind <> 'zendesk' OR p.write_back))
    ON CONFLICT (subscription_id, event_id) DO NOTHING
)
"#
        )
    };
}

/// The `SET` list that queues a finished delivery again as new, from `$available_at`.
macro_rules! requeued {
    ($available_at:literal) => {
        concat!(
            "status = 'pending', available_at = ",
            $available_at,
            ", attempts = 0, finished_at = NULL, last_error = NULL, error_class = NULL"
        )
    };
}

/// [`announce_from`] for a CTE `done`: the job just closed with its result stored.
macro_rules! announce_done {
    () => {
        $crate::pipeline::outbox::announce::announce_from!("done", "te.idempotency_key", "false")
    };
}

pub(crate) use {announce_done, announce_from, event_id, requeued, subscribers_of_t};

/// Announces every stored result of a version just promoted, to the subscribers of each of
/// its tickets, and to the desk's Zendesk write-back when `$3` (`--write-back`). Runs in the
/// promotion's transaction. A write-back already done (a version promoted again: a rollback)
/// is queued again, so Zendesk is restored too; a webhook's receiver has that event's id.
const ANNOUNCE_PROMOTED: &str = concat!(
    r#"
INSERT INTO delivery (subscription_id, ticket_id, idempotency_key, event_id, available_at,
                      promoted)
SELECT s.id, te.ticket_id, te.idempotency_key, "#,
    event_id!("te.ticket_id", "te.idempotency_key"),
    r#", greatest(now(), t.held_until), true
FROM ticket_evaluation te
JOIN evaluation_result r ON r.idempotency_key = te.idempotency_key
JOIN ticket t ON t.id = te.ticket_id AND t.workload = 'production'
"#,
    subscribers_of_t!(),
    r#"
WHERE te.prompt_version = $1 AND te.model_version = $2 AND (s.kind <> 'zendesk' OR $3)
ON CONFLICT (subscription_id, event_id) DO UPDATE
SET "#,
    requeued!("EXCLUDED.available_at"),
    r#", promoted = true
WHERE delivery.status IN ('done', 'dead')
  AND delivery.subscription_id IN (SELECT id FROM subscription WHERE kind = 'zendesk')
"#
);

pub async fn announce_promoted(
    client: &impl GenericClient,
    version: &VersionPair,
    write_back: bool,
) -> Result<u64> {
    Ok(client
        .execute(
            ANNOUNCE_PROMOTED,
            &[&version.prompt_version, &version.model_version, &write_back],
        )
        .await?)
}
