//! Which local classifiers learnt from which production tickets (`local_model_ticket`, V29):
//! recorded when one is trained (from the database, `results:DAYS`, `feedback:DAYS`, and from a
//! `set:`, the tickets with a learnt row's text: [`tickets_with_text`]), read and
//! removed when a ticket is erased, so the erasure's report names every classifier that still
//! holds what it learnt from the ticket's text (the classifier is kept until it is retired;
//! its `erased_tickets` counts them). Classifiers stored before V29 recorded no ticket: for
//! those, the report lists every one trained from the database after the ticket existed.

use deadpool_postgres::GenericClient;
use serde::Serialize;
use uuid::Uuid;

use crate::domain::error::Result;

/// Rows per statement when recording (a training reads at most 300,000 per source).
const RECORD_BATCH: usize = 10_000;

/// Records that `version` learnt from `tickets`, and that it records its tickets.
pub async fn record(client: &impl GenericClient, version: &str, tickets: &[Uuid]) -> Result<()> {
    for chunk in tickets.chunks(RECORD_BATCH) {
        client
            .execute(
                "INSERT INTO local_model_ticket (ticket_id, version)
                 SELECT DISTINCT t, $2 FROM unnest($1::uuid[]) AS t
                 ON CONFLICT DO NOTHING",
                &[&chunk, &version],
            )
            .await?;
    }
    client
        .execute(
            "UPDATE local_model SET tickets_recorded = true WHERE version = $1",
            &[&version],
        )
        .await?;
    Ok(())
}

/// The production tickets whose text is one of the rows (`subjects[i]`, `messages[i]`) a
/// classifier learnt from a set: a desk's history (`triage import zendesk`) holds the text of
/// tickets the desk also sent here. Compared as the content key compares them (leading and
/// trailing whitespace aside). One pass over `ticket`, as a training reads its sources.
pub async fn tickets_with_text(
    client: &impl GenericClient,
    subjects: &[String],
    messages: &[String],
) -> Result<Vec<Uuid>> {
    if subjects.is_empty() {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            r#"
WITH learnt AS (
    SELECT DISTINCT btrim(s, E' \t\n\r\f\v') AS subject, btrim(m, E' \t\n\r\f\v') AS message
    FROM unnest($1::text[], $2::text[]) AS r(s, m)
)
SELECT t.id FROM ticket t
JOIN learnt l ON btrim(t.subject, E' \t\n\r\f\v') = l.subject
             AND btrim(t.message, E' \t\n\r\f\v') = l.message
"#,
            &[&subjects, &messages],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// A classifier an erasure names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrainedClassifier {
    /// `local-<hex>`: `triage models` lists it; retire it to forget what it learnt.
    pub version: String,
    /// How many of the erased tickets it learnt from (`None`: it recorded no tickets, and was
    /// trained from the database after one of them was created: it may have).
    pub tickets: Option<i64>,
}

/// Removes the erased `tickets`' rows, counts them on each classifier, and names every
/// classifier that learnt from one of them, or may have (a classifier that recorded nothing,
/// trained from the database after the earliest of them was created). Runs in the erasure's
/// transaction, before the tickets go.
pub async fn forget(
    client: &impl GenericClient,
    tickets: &[Uuid],
) -> Result<Vec<TrainedClassifier>> {
    let rows = client
        .query(
            r#"
WITH gone AS (
    DELETE FROM local_model_ticket WHERE ticket_id = ANY($1) RETURNING version
), counted AS (
    SELECT version, count(*) AS tickets FROM gone GROUP BY version
), marked AS (
    UPDATE local_model m SET erased_tickets = m.erased_tickets + c.tickets
    FROM counted c WHERE m.version = c.version
    RETURNING m.version, c.tickets
)
SELECT version, tickets FROM marked
UNION ALL
SELECT m.version, NULL FROM local_model m
WHERE NOT m.tickets_recorded
  AND m.created_at >= (SELECT min(created_at) FROM ticket WHERE id = ANY($1))
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(m.sources) s
              WHERE s->>'source' LIKE 'results:%' OR s->>'source' LIKE 'feedback:%')
ORDER BY 1
"#,
            &[&tickets],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| TrainedClassifier {
            version: row.get(0),
            tickets: row.get(1),
        })
        .collect())
}
