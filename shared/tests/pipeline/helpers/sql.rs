//! SQL against a test's database: one row, a count, statements run as they are, and waits
//! on a count (never a fixed sleep).

use std::collections::BTreeMap;

use super::TestApp;

impl TestApp {
    /// The one row `sql` returns.
    pub async fn row(&self, sql: &str) -> tokio_postgres::Row {
        let client = self.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap()
    }

    pub async fn count(&self, sql: &str) -> i64 {
        self.row(sql).await.get(0)
    }

    /// Runs `sql` (statements without parameters), e.g. to move time-stamps back.
    pub async fn exec(&self, sql: &str) {
        let client = self.pool.get().await.unwrap();
        client.batch_execute(sql).await.unwrap();
    }

    /// Polls the count `sql` returns until `done` holds, or panics naming `what` after 10 s:
    /// awaiting a condition, never sleeping a fixed time.
    pub async fn wait_until(&self, sql: &str, done: impl Fn(i64) -> bool, what: &str) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done(self.count(sql).await) {
            assert!(std::time::Instant::now() < until, "{what}");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Until a claimed job's lease has run out.
    pub async fn wait_until_lease_expired(&self) {
        self.wait_until(
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'processing' AND locked_until < now()",
            |n| n > 0,
            "the lease never expired",
        )
        .await;
    }

    pub async fn status_counts(&self) -> BTreeMap<String, i64> {
        let client = self.pool.get().await.unwrap();
        client
            .query(
                "SELECT status, count(*) FROM evaluation_outbox GROUP BY status",
                &[],
            )
            .await
            .unwrap()
            .into_iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    }
}
