//! Requests per principal per minute (`TRIAGE_CALLER_RPM`): every API route a caller uses
//! counts, so one caller's reads or feedback cannot take the stage's throttle from everyone
//! else's `POST /tickets`. Counted in PostgreSQL beside the daily ticket quota (one row per
//! owner and UTC minute), so across every API instance; a fixed window, whose edge lets a
//! caller make at most twice its rate in one minute straddling two. `POST /tickets` counts in
//! ingest's own statement (`ingest::Submitter::rate_per_minute`), every other request here.

use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use deadpool_postgres::Pool;

use crate::{db, domain::error::Result};

/// Counts one request of `owner` in this minute; NULL when its `limit` is reached (V33's
/// `caller_minute_count`, which `POST /tickets` calls inside ingest's one statement).
const COUNT: &str = "SELECT caller_minute_count($1, $2)";

/// `None` when `owner` may make this request (it is counted); else how long until the next
/// minute, when it may again.
pub async fn count(pool: &Pool, owner: &str, limit: u32) -> Result<Option<Duration>> {
    let client = db::client(pool).await?;
    let limit = i32::try_from(limit).unwrap_or(i32::MAX);
    let statement = client.prepare_cached(COUNT).await?;
    let counted: Option<i32> = client
        .query_one(&statement, &[&owner, &limit])
        .await?
        .get(0);
    Ok(counted.is_none().then(|| until_next_minute(Utc::now())))
}

/// Whole seconds until the next UTC minute, at least one.
pub fn until_next_minute(now: DateTime<Utc>) -> Duration {
    Duration::from_secs(u64::from(60 - now.second()).max(1))
}

/// Removes the counts of minutes before the last one (the sweeper's).
pub async fn forget_past(pool: &Pool, batch: i64) -> Result<u64> {
    let client = db::client(pool).await?;
    Ok(client
        .execute(
            "DELETE FROM caller_minute_requests WHERE (owner, minute) IN
               (SELECT owner, minute FROM caller_minute_requests
                WHERE minute < date_trunc('minute', now()) - interval '1 minute' LIMIT $1)",
            &[&batch],
        )
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_caller_is_told_to_retry_when_the_minute_ends() {
        let at = |text: &str| text.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(until_next_minute(at("2026-12-01T00:00:00Z")).as_secs(), 60);
        assert_eq!(until_next_minute(at("2026-12-01T00:00:59.5Z")).as_secs(), 1);
        assert_eq!(until_next_minute(at("2026-12-01T00:00:30Z")).as_secs(), 30);
    }
}
