//! Redrive: dead letters back to the queue, once their cause is fixed (a prompt or contract
//! bug, an outage that exhausted attempts). Attempts start over; `available_at` is spread like
//! reprocess; `last_error` and `error_class` stay as the history of why the job died. A second
//! run finds nothing: the jobs it moved are no longer dead.

use std::{collections::BTreeMap, time::Duration};

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;

use crate::{db, domain::error::Result, pipeline::outbox::Lane};

/// Which dead letters, and how.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Only this reason class (`error_class`, as `triage dead-letters` groups them).
    pub reason: Option<String>,
    /// Only jobs that died within this long.
    pub since: Option<Duration>,
    /// At most this many jobs.
    pub limit: Option<i64>,
    pub spread: Duration,
    /// The lane the jobs go back to: bulk unless the operator needs them ahead of it.
    pub lane: Lane,
    pub batch_size: i64,
    /// Count what would move, write nothing.
    pub dry_run: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub dry_run: bool,
    pub moved: i64,
    pub by_reason: BTreeMap<String, i64>,
}

/// The next page of dead letters, oldest death first (`idx_outbox_dead`). The cursor is the
/// last page's (finished_at, id); none on the first page. Production work only, as
/// `triage dead-letters` reports it: an eval's dead letters are part of its version's figures.
const NEXT_DEAD: &str = r#"
SELECT id, finished_at, coalesce(error_class, 'unknown')
FROM evaluation_outbox
WHERE status = 'dead' AND workload = 'production'
  AND ($1::text IS NULL OR error_class = $1)
  AND ($2::float8 IS NULL OR finished_at > now() - make_interval(secs => $2))
  AND ($3::timestamptz IS NULL OR (finished_at, id) > ($3, $4))
ORDER BY finished_at, id
LIMIT $5
"#;

/// The models of the dead letters a selection covers (its limit aside): a redrive, like a
/// reprocess, is refused for work the daily budget could not count.
const MODELS: &str = r#"
SELECT DISTINCT model_version
FROM evaluation_outbox
WHERE status = 'dead' AND workload = 'production'
  AND ($1::text IS NULL OR error_class = $1)
  AND ($2::float8 IS NULL OR finished_at > now() - make_interval(secs => $2))
"#;

pub async fn models(pool: &Pool, selection: &Selection) -> Result<Vec<String>> {
    let client = db::client(pool).await?;
    let since = selection.since.map(|d| d.as_secs_f64());
    let rows = client.query(MODELS, &[&selection.reason, &since]).await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// `status = 'dead'` is re-checked under the row lock: a job a concurrent redrive already
/// moved is skipped, so the counts are exact. Redriven work goes to the chosen lane (bulk
/// unless asked: it then never makes new tickets wait).
const MOVE_TO_QUEUE: &str = r#"
UPDATE evaluation_outbox
SET status = 'pending', attempts = 0, finished_at = NULL, lane = $3,
    available_at = now() + random() * make_interval(secs => $2)
WHERE id = ANY($1) AND status = 'dead'
RETURNING coalesce(error_class, 'unknown')
"#;

pub async fn redrive(pool: &Pool, selection: &Selection) -> Result<Report> {
    let client = db::client(pool).await?;
    let mut report = Report {
        dry_run: selection.dry_run,
        ..Report::default()
    };
    let since = selection.since.map(|d| d.as_secs_f64());
    let mut after: (Option<DateTime<Utc>>, i64) = (None, 0);
    loop {
        let room = selection.limit.map_or(selection.batch_size, |limit| {
            (limit - report.moved).min(selection.batch_size)
        });
        if room <= 0 {
            break;
        }
        let page = client
            .query(
                NEXT_DEAD,
                &[&selection.reason, &since, &after.0, &after.1, &room],
            )
            .await?;
        let Some(last) = page.last() else { break };
        after = (last.get(1), last.get(0));
        let reasons: Vec<String> = if selection.dry_run {
            page.iter().map(|row| row.get(2)).collect()
        } else {
            let ids: Vec<i64> = page.iter().map(|row| row.get(0)).collect();
            client
                .query(
                    MOVE_TO_QUEUE,
                    &[
                        &ids,
                        &selection.spread.as_secs_f64(),
                        &selection.lane.as_str(),
                    ],
                )
                .await?
                .iter()
                .map(|row| row.get(0))
                .collect()
        };
        report.moved += reasons.len() as i64;
        for reason in reasons {
            *report.by_reason.entry(reason).or_default() += 1;
        }
        if (page.len() as i64) < room {
            break;
        }
    }
    tracing::info!(?report, "redrive finished");
    Ok(report)
}
