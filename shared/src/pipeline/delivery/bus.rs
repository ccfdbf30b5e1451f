//! The deployment's event bus as a sink: every production result, as EventBridge entries
//! (`Source` `triage`, `DetailType` `TicketEvaluated`, `Detail` the event's data with its
//! event id), batched up to the API's limit; each entry succeeds or is retried on its own.
//! The client is `aws::eventbridge`; the pipeline only knows this trait.

use deadpool_postgres::GenericClient;
use futures::future::BoxFuture;
use uuid::Uuid;

use super::decision::Attempt;
use crate::domain::error::Result;

/// PutEvents takes at most ten entries.
pub const BATCH: usize = 10;
pub const SOURCE: &str = "triage";
pub const DETAIL_TYPE: &str = "TicketEvaluated";

/// One entry: the event id and the `Detail` JSON.
#[derive(Debug, Clone)]
pub struct BusEntry {
    pub event_id: String,
    pub detail: String,
}

pub trait Bus: Send + Sync {
    /// Puts up to [`BATCH`] entries on `bus`; answers one attempt per entry, in order.
    fn put<'a>(&'a self, bus: &'a str, entries: &'a [BusEntry]) -> BoxFuture<'a, Vec<Attempt>>;
}

/// The answer of PutEvents, entry by entry: an entry with an error code failed, any other
/// was accepted. Entries the answer does not mention (a short answer) count as failed.
pub fn per_entry(sent: usize, errors: &[Option<String>]) -> Vec<Attempt> {
    (0..sent)
        .map(|i| match errors.get(i) {
            Some(None) => Attempt::Acknowledged,
            Some(Some(code)) => Attempt::Failed(format!("PutEvents entry refused: {code}")),
            None => Attempt::Failed("PutEvents answered no result for the entry".into()),
        })
        .collect()
}

/// The bus as a subscription of every ticket, created once (by the deliverer that has it
/// configured): from then on, results are announced to it.
pub async fn ensure_subscription(client: &impl GenericClient, bus: &str) -> Result<()> {
    client
        .execute(
            "INSERT INTO subscription (id, kind, target)
             SELECT $1, 'eventbridge', $2
             WHERE NOT EXISTS (SELECT 1 FROM subscription WHERE kind = 'eventbridge' AND target = $2)",
            &[&Uuid::new_v4(), &bus],
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_failures_are_per_entry() {
        let answer = per_entry(3, &[None, Some("ThrottlingException".into())]);
        assert_eq!(answer[0], Attempt::Acknowledged);
        assert!(matches!(&answer[1], Attempt::Failed(e) if e.contains("Throttling")));
        assert!(matches!(&answer[2], Attempt::Failed(_)));
    }
}
