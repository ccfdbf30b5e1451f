//! The audit sample (docs/cascade.md, "The audit"): of the new tickets a cascade's classifier
//! would answer locally, a share (`TRIAGE_AUDIT_SHARE`) drawn uniformly at random goes to the
//! large model as well, which answers the ticket. The draw is recorded with what the
//! classifier said (`cascade_audit`, V39) before the call, so the pair (classifier, model)
//! and any desk label are an unbiased sample of the live classifier's precision: unlike
//! desk labels, which come where agents look, and the model's own answers, which exist only
//! where the classifier was unsure. The call is a call like any other: in the ledger, in the
//! rate limit, in the budget, and in cost per ticket.
//!
//! Only the interactive lane is sampled: it is the live traffic; reprocess and eval work judge
//! versions, not the deployment. A job drawn once stays drawn on its retries (the row is
//! read back), so a failing call never turns an audited ticket into a local answer.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use super::LocalAnswer;
use crate::{
    domain::error::Result,
    pipeline::outbox::{ClaimedJob, Lane},
};

/// The job's draw: recorded when it fell below the share (`$6 < $7`); either way, whether the
/// job is audited, by this draw or by one an earlier attempt recorded (a job given back
/// before its call is claimed again with a new draw, which must not undo the first).
const DRAW: &str = r#"
WITH drawn AS (
    INSERT INTO cascade_audit
        (idempotency_key, model_version, department, is_urgent, confidence, draw, share)
    SELECT $1::text, $2::text, $3::text, $4::boolean, $5::float8, $6::float8, $7::float8
    WHERE $6::float8 < $7::float8
    ON CONFLICT (idempotency_key, model_version) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM drawn)
    OR EXISTS (SELECT 1 FROM cascade_audit WHERE idempotency_key = $1 AND model_version = $2)
"#;

/// The audited answers of `$1` since `$2`, paired with what answered the ticket (the large
/// model's stored result) and the desk's current label of the department, if any: per
/// department the classifier said and UTC day of the draw, how many, how many right by the
/// best truth there is (the desk's label, else the audit's answer), and how many of those a
/// desk label judged.
const TALLY: &str = r#"
SELECT a.department,
       (a.drawn_at AT TIME ZONE 'UTC')::date AS day,
       count(*),
       count(*) FILTER (WHERE a.department = coalesce(desk.department, r.department)),
       count(desk.department)
FROM cascade_audit a
JOIN evaluation_result r ON r.idempotency_key = a.idempotency_key AND r.answered_by = 'model'
LEFT JOIN LATERAL (
    SELECT f.department
    FROM ticket_evaluation te
    JOIN ticket_feedback f ON f.ticket_id = te.ticket_id
    WHERE te.idempotency_key = a.idempotency_key
      AND f.superseded_at IS NULL AND f.labeller AND f.department IS NOT NULL
    ORDER BY f.created_at DESC
    LIMIT 1
) desk ON true
WHERE a.model_version = $1 AND a.drawn_at >= $2
GROUP BY a.department, day
ORDER BY a.department, day
"#;

/// Of `$1`'s results since `$2`, how many its classifier answered and how many there are (an
/// operator's read: it scans the window's results).
const LOCAL_SHARE: &str = "SELECT count(*) FILTER (WHERE answered_by = 'local'), count(*) \
    FROM evaluation_result WHERE model_version = $1 AND computed_at >= $2";

/// A uniform draw in [0, 1).
fn draw() -> f64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    // 53 random bits: every representable step of [0, 1) equally likely.
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether `job` is audited: drawn now below `share` and recorded with the classifier's
/// `answer` (`urgent`: its urgency under the job's policy), or drawn so by an earlier attempt.
/// Only the interactive lane is sampled; one statement either way.
pub async fn audited(
    client: &impl GenericClient,
    job: &ClaimedJob,
    (answer, urgent): (&LocalAnswer, bool),
    share: f64,
) -> Result<bool> {
    if job.lane != Lane::Interactive || share <= 0.0 {
        return Ok(false);
    }
    let (key, version) = (job.key.as_str(), job.versions.model_version.as_str());
    let row = client
        .query_one(
            DRAW,
            &[
                &key,
                &version,
                &answer.evaluation.department,
                &urgent,
                &answer.confidence,
                &draw(),
                &share,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// The audited answers of one department label the classifier gave on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audited {
    pub department: String,
    pub day: chrono::NaiveDate,
    pub n: u64,
    pub correct: u64,
    /// Of `n`, judged by a desk label rather than the audit's own answer.
    pub by_desk: u64,
}

/// The audited answers of the cascade `model_version` drawn since `since`, by department and
/// day.
pub async fn tally(
    client: &impl GenericClient,
    model_version: &str,
    since: DateTime<Utc>,
) -> Result<Vec<Audited>> {
    let rows = client.query(TALLY, &[&model_version, &since]).await?;
    Ok(rows
        .iter()
        .map(|row| Audited {
            department: row.get(0),
            day: row.get(1),
            n: row.get::<_, i64>(2) as u64,
            correct: row.get::<_, i64>(3) as u64,
            by_desk: row.get::<_, i64>(4) as u64,
        })
        .collect())
}

/// The share of `model_version`'s results since `since` its classifier answered; `None`
/// without results.
pub async fn local_share(
    client: &impl GenericClient,
    model_version: &str,
    since: DateTime<Utc>,
) -> Result<Option<f64>> {
    let row = client
        .query_one(LOCAL_SHARE, &[&model_version, &since])
        .await?;
    let (local, all): (i64, i64) = (row.get(0), row.get(1));
    Ok((all > 0).then(|| local as f64 / all as f64))
}

#[cfg(test)]
mod tests {
    use super::draw;

    /// 20,000 draws below 0.2: Binomial(20000, 0.2), sd about 57; ±400 is 7 sd.
    #[test]
    fn draws_are_uniform_enough_to_sample_a_share() {
        let draws: Vec<f64> = (0..20_000).map(|_| draw()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let below = draws.iter().filter(|d| **d < 0.2).count();
        assert!((3_600..=4_400).contains(&below), "{below}");
    }
}
