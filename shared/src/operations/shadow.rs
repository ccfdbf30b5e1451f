//! Shadow mode on history (article step 6): reprocessing keeps the old results, so two
//! versions can be compared on the same tickets before one is promoted. Only tickets with a
//! result under both versions count.

use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};

use crate::{
    db,
    domain::{error::Result, ticket::TicketId, versions::VersionPair},
};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShadowDiff {
    pub from: VersionPair,
    pub to: VersionPair,
    /// Tickets with a result under both versions.
    pub compared: i64,
    /// Share of compared tickets whose department is the same; `None` when none compared.
    pub department_agreement: Option<f64>,
    /// How many tickets went from each department to each other (agreements included).
    pub confusion: Vec<ConfusionCell>,
    pub urgency_diff: UrgencyDiff,
    /// Department changes first, then the largest |urgency difference|.
    pub largest_disagreements: Vec<Disagreement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfusionCell {
    pub from: String,
    pub to: String,
    pub count: i64,
}

/// The distribution of `to.urgency_score - from.urgency_score`; every statistic is `None`
/// when nothing was compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UrgencyDiff {
    pub min: Option<f64>,
    pub p10: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    pub histogram: Vec<Bucket>,
}

/// Differences in `[lower, upper)`; the outer buckets are open-ended (`None`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bucket {
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    pub ticket_id: TicketId,
    pub from_department: String,
    pub to_department: String,
    pub from_urgency_score: f64,
    pub to_urgency_score: f64,
    pub urgency_diff: f64,
}

/// Inner edges of the histogram: a band around zero ("no real change"), then small, medium
/// and large moves either way.
const HISTOGRAM_EDGES: [f64; 6] = [-0.5, -0.2, -0.05, 0.05, 0.2, 0.5];

/// How many disagreements are listed.
const LARGEST: i64 = 10;

/// Everything in one statement, so all numbers come from one snapshot. A ticket has at most
/// one key per version pair under one policy (`$7`; the key is derived from its content, the
/// versions and the policy).
const SHADOW_DIFF: &str = r#"
WITH pairs AS (
    SELECT a.ticket_id,
           ra.department AS from_department, rb.department AS to_department,
           ra.urgency_score AS from_urgency_score, rb.urgency_score AS to_urgency_score,
           rb.urgency_score - ra.urgency_score AS urgency_diff
    FROM ticket_evaluation a
    JOIN evaluation_result ra ON ra.idempotency_key = a.idempotency_key AND ra.policy_version = $7
    JOIN ticket_evaluation b
      ON b.ticket_id = a.ticket_id AND b.prompt_version = $3 AND b.model_version = $4
    JOIN evaluation_result rb ON rb.idempotency_key = b.idempotency_key AND rb.policy_version = $7
    WHERE a.prompt_version = $1 AND a.model_version = $2
), buckets AS (
    SELECT width_bucket(urgency_diff, $5::float8[]) AS bucket, count(*) AS count
    FROM pairs GROUP BY 1
)
SELECT
    (SELECT count(*) FROM pairs),
    (SELECT avg((from_department = to_department)::int)::float8 FROM pairs),
    (SELECT coalesce(jsonb_agg(c ORDER BY c.count DESC, c."from", c."to"), '[]')
     FROM (SELECT from_department AS "from", to_department AS "to", count(*) AS count
           FROM pairs GROUP BY 1, 2) c),
    (SELECT min(urgency_diff) FROM pairs),
    (SELECT percentile_cont(ARRAY[0.1, 0.5, 0.9]) WITHIN GROUP (ORDER BY urgency_diff) FROM pairs),
    (SELECT max(urgency_diff) FROM pairs),
    (SELECT avg(urgency_diff) FROM pairs),
    (SELECT coalesce(array_agg(coalesce(b.count, 0) ORDER BY n), '{}')
     FROM generate_series(0, cardinality($5::float8[])) n
     LEFT JOIN buckets b ON b.bucket = n
     WHERE (SELECT count(*) FROM pairs) > 0),
    (SELECT coalesce(jsonb_agg(d), '[]') FROM (
        SELECT ticket_id, from_department, to_department,
               from_urgency_score, to_urgency_score, urgency_diff
        FROM pairs
        WHERE from_department <> to_department OR urgency_diff <> 0
        ORDER BY from_department <> to_department DESC, abs(urgency_diff) DESC, ticket_id
        LIMIT $6) d)
"#;

/// `from` against `to` on the tickets answered under both, under the policy `policy`.
pub async fn shadow_diff(
    pool: &Pool,
    from: &VersionPair,
    to: &VersionPair,
    policy: &str,
) -> Result<ShadowDiff> {
    let client = db::client(pool).await?;
    let row = client
        .query_one(
            SHADOW_DIFF,
            &[
                &from.prompt_version,
                &from.model_version,
                &to.prompt_version,
                &to.model_version,
                &HISTOGRAM_EDGES.as_slice(),
                &LARGEST,
                &policy,
            ],
        )
        .await?;
    let percentiles: Option<Vec<f64>> = row.get(4);
    let percentile = |i: usize| percentiles.as_ref().map(|p| p[i]);
    let counts: Vec<i64> = row.get(7);
    Ok(ShadowDiff {
        from: from.clone(),
        to: to.clone(),
        compared: row.get(0),
        department_agreement: row.get(1),
        confusion: from_json(row.get(2)),
        urgency_diff: UrgencyDiff {
            min: row.get(3),
            p10: percentile(0),
            p50: percentile(1),
            p90: percentile(2),
            max: row.get(5),
            mean: row.get(6),
            histogram: histogram(&counts),
        },
        largest_disagreements: from_json(row.get(8)),
    })
}

/// `width_bucket` numbers the buckets 0 (below the first edge) to `edges.len()` (at or above
/// the last); bucket `i` spans `[edges[i-1], edges[i])`.
fn histogram(counts: &[i64]) -> Vec<Bucket> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &count)| Bucket {
            lower: i.checked_sub(1).map(|j| HISTOGRAM_EDGES[j]),
            upper: HISTOGRAM_EDGES.get(i).copied(),
            count,
        })
        .collect()
}

/// The statement aggregates rows as JSON in exactly the shape of `T`.
fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Vec<T> {
    serde_json::from_value(value).expect("rows shaped by SHADOW_DIFF")
}
