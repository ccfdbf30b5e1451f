//! What trains a local classifier, from the database: the large model's own answers
//! (distillation; never the classifier's own, never eval work) and the help desk's
//! corrections. A labelled set's dev rows come from `operations::train`. Erased tickets are
//! gone from both, so they never train the next classifier. Each source is read with each
//! ticket owner's share capped (`TRIAGE_TRAIN_OWNER_SHARE`, [`owner_cap`]), so one caller's
//! traffic cannot make up a training set (docs/labelling.md).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use tokio_postgres::types::ToSql;

use crate::{
    domain::error::Result,
    providers::{classifier::Example, Policy},
};

/// How much one correction from the desk counts beside one answer of the model: the desk's
/// word is the truth the model's answers only approximate.
pub const FEEDBACK_WEIGHT: f32 = 3.0;

/// The most examples one source gives: the newest. Training holds them in memory (about 300
/// bytes each), and the ops Lambda's memory is the bound.
pub const MAX_EXAMPLES_PER_SOURCE: i64 = 300_000;

/// Production results answered by a model under the policy `$3` in the last `$1` days, with
/// the text of the ticket they name, its owner and the model version that labelled it;
/// `$2` turns the answer's `is_urgent` into a label. A classifier learns one taxonomy.
const RESULTS: &str = r#"
SELECT t.subject, t.message, r.department, r.is_urgent >= $2 AS is_urgent, t.id,
       coalesce(t.owner, '(none)') AS owner, r.model_version AS giver, r.computed_at AS at, r.idempotency_key AS tiebreak
FROM evaluation_result r
JOIN ticket t ON t.id = r.ticket_id AND t.workload = 'production'
WHERE r.computed_at > now() - make_interval(days => $1) AND r.answered_by = 'model'
  AND r.policy_version = $3
"#;

/// A labeller's current labels given in the last `$1` days in the policy's departments (`$2`;
/// labels given under another taxonomy are not this classifier's), with the ticket's owner and
/// who gave them. Feedback from a giver who may not label never trains (docs/labelling.md).
const FEEDBACK: &str = r#"
SELECT t.subject, t.message, f.department, f.is_urgent, t.id,
       coalesce(t.owner, '(none)') AS owner, f.given_by AS giver, f.created_at AS at, f.id AS tiebreak
FROM ticket_feedback f
JOIN ticket t ON t.id = f.ticket_id
WHERE f.superseded_at IS NULL AND f.labeller AND f.created_at > now() - make_interval(days => $1)
  AND f.department = ANY ($2::text[])
"#;

/// How many of a source's rows each owner has (tickets stored before owners were, V8, are
/// one owner, `(none)`).
fn per_owner(source: &str) -> String {
    format!("SELECT owner, count(*) FROM ({source}) AS s GROUP BY owner")
}

/// A source of `params` parameters read capped: at most the next parameter's (the owner cap)
/// rows of each owner, its newest, and at most the one after's rows in all, the newest first.
fn capped(source: &str, params: usize) -> String {
    let (cap, limit) = (params + 1, params + 2);
    format!(
        "SELECT subject, message, department, is_urgent, id, owner, giver FROM (
             SELECT s.*, row_number() OVER (PARTITION BY owner ORDER BY at DESC, tiebreak) AS nth
             FROM ({source}) AS s
         ) AS ranked
         WHERE nth <= ${cap}
         ORDER BY at DESC, tiebreak
         LIMIT ${limit}"
    )
}

/// The most examples one owner may give a source of `counts` (examples per owner) so that
/// none gives more than `share` of what is read, or, with fewer owners than `1 / share`, more
/// than an equal share; `None`: no cap (a single owner, or no owner above it). The largest `c`
/// with `c <= share' * sum(min(n, c))`: that sum over `c` only falls as `c` grows.
pub fn owner_cap(counts: &[i64], share: f64) -> Option<i64> {
    let owners = counts.iter().filter(|&&n| n > 0).count();
    let most = counts.iter().copied().max().unwrap_or(0);
    if owners <= 1 {
        return None;
    }
    let share = share.max(1.0 / owners as f64);
    let holds =
        |c: i64| c as f64 <= share * counts.iter().map(|&n| n.min(c)).sum::<i64>() as f64 + 1e-9;
    if holds(most) {
        return None;
    }
    // holds(1): each of `owners` gives one, and share >= 1 / owners.
    let (mut low, mut high) = (1, most);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if holds(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    Some(low)
}

/// Examples read from production tickets, with the tickets they were read from (recorded
/// with the classifier, `trained_on`, for erasure) and where they came from.
#[derive(Debug, Default)]
pub struct FromTickets {
    pub examples: Vec<Example>,
    pub tickets: Vec<uuid::Uuid>,
    pub provenance: Provenance,
}

/// Who a source's examples came from (`local_model.provenance`, V36): per ticket owner (the
/// digest stored on the ticket) and per giver (the model version that answered; the feedback's
/// giver as `ticket_feedback.given_by` records it), and the owner cap applied.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub struct Provenance {
    pub owner_cap: Option<i64>,
    pub owners: BTreeMap<String, usize>,
    pub givers: BTreeMap<String, usize>,
}

impl FromTickets {
    fn of(rows: &[tokio_postgres::Row], weight: f32, owner_cap: Option<i64>) -> Self {
        let mut provenance = Provenance {
            owner_cap,
            ..Provenance::default()
        };
        for row in rows {
            *provenance.owners.entry(row.get(5)).or_default() += 1;
            *provenance.givers.entry(row.get(6)).or_default() += 1;
        }
        Self {
            examples: rows.iter().map(|row| example(row, weight)).collect(),
            tickets: rows.iter().map(|row| row.get(4)).collect(),
            provenance,
        }
    }
}

/// A source's owner cap under `share`, from its rows per owner.
async fn cap_of(
    client: &impl GenericClient,
    source: &str,
    params: &[&(dyn ToSql + Sync)],
    share: f64,
) -> Result<Option<i64>> {
    let rows = client.query(&per_owner(source), params).await?;
    let counts: Vec<i64> = rows.iter().map(|row| row.get(1)).collect();
    Ok(owner_cap(&counts, share))
}

/// Reads `source` (its parameters `params`) capped per owner under `share`.
async fn read(
    client: &impl GenericClient,
    source: &str,
    params: &[&(dyn ToSql + Sync)],
    share: f64,
    weight: f32,
) -> Result<FromTickets> {
    let cap = cap_of(client, source, params, share).await?;
    let (bound, limit) = (cap.unwrap_or(i64::MAX), MAX_EXAMPLES_PER_SOURCE);
    let mut all = params.to_vec();
    all.extend([&bound as &(dyn ToSql + Sync), &limit]);
    let rows = client.query(&capped(source, params.len()), &all).await?;
    Ok(FromTickets::of(&rows, weight, cap))
}

/// What a source would read capped (rows, bytes of text), counted without reading it.
async fn size_of(
    client: &impl GenericClient,
    source: &str,
    params: &[&(dyn ToSql + Sync)],
    share: f64,
) -> Result<(i64, i64)> {
    let cap = cap_of(client, source, params, share).await?;
    let (bound, limit) = (cap.unwrap_or(i64::MAX), MAX_EXAMPLES_PER_SOURCE);
    let mut all = params.to_vec();
    all.extend([&bound as &(dyn ToSql + Sync), &limit]);
    let counted = format!(
        "SELECT count(*), coalesce(sum(octet_length(s.subject) + octet_length(s.message)), 0)::int8
         FROM ({}) AS s",
        capped(source, params.len())
    );
    let row = client.query_one(&counted, &all).await?;
    Ok((row.get(0), row.get(1)))
}

/// The model's answers of the last `days` days, each owner's share capped under `share`
/// (`TRIAGE_TRAIN_OWNER_SHARE`).
pub async fn results(
    client: &impl GenericClient,
    days: i32,
    policy: &Policy,
    share: f64,
) -> Result<FromTickets> {
    let threshold = policy.urgent_threshold;
    let params: [&(dyn ToSql + Sync); 3] = [&days, &threshold, &policy.version];
    read(client, RESULTS, &params, share, 1.0).await
}

/// A labeller's current labels of the last `days` days, each owner's share capped.
pub async fn feedback(
    client: &impl GenericClient,
    days: i32,
    policy: &Policy,
    share: f64,
) -> Result<FromTickets> {
    let params: [&(dyn ToSql + Sync); 2] = [&days, &policy.departments];
    read(client, FEEDBACK, &params, share, FEEDBACK_WEIGHT).await
}

/// What [`results`] would read (rows, bytes of text), counted without reading it: the ops
/// Lambda refuses a training that would not fit its memory before it starts.
pub async fn results_size(
    client: &impl GenericClient,
    days: i32,
    policy: &Policy,
    share: f64,
) -> Result<(i64, i64)> {
    let threshold = policy.urgent_threshold;
    let params: [&(dyn ToSql + Sync); 3] = [&days, &threshold, &policy.version];
    size_of(client, RESULTS, &params, share).await
}

/// What [`feedback`] would read, counted without reading it.
pub async fn feedback_size(
    client: &impl GenericClient,
    days: i32,
    policy: &Policy,
    share: f64,
) -> Result<(i64, i64)> {
    let params: [&(dyn ToSql + Sync); 2] = [&days, &policy.departments];
    size_of(client, FEEDBACK, &params, share).await
}

/// A source (its `days` parameter first) read over the window `[until - days, until)` only:
/// what a classifier trained at `until` would have read (`triage eval --by-time`).
fn before(source: &str, params: usize) -> String {
    let (until, days) = (params + 1, params + 2);
    format!(
        "SELECT * FROM ({source}) AS w \
         WHERE w.at < ${until} AND w.at >= ${until} - make_interval(days => ${days})"
    )
}

/// Days back from now that reach any window [`before`] reads (`$1` of the sources).
const ANY_WINDOW: i32 = 366 * 100;

/// [`results`] as they stood at `until`: the model's answers of the `days` days before it.
pub async fn results_before(
    client: &impl GenericClient,
    until: DateTime<Utc>,
    days: i32,
    policy: &Policy,
    share: f64,
) -> Result<FromTickets> {
    let threshold = policy.urgent_threshold;
    let params: [&(dyn ToSql + Sync); 5] =
        [&ANY_WINDOW, &threshold, &policy.version, &until, &days];
    read(client, &before(RESULTS, 3), &params, share, 1.0).await
}

/// [`feedback`] as it stood at `until`: labellers' labels of the `days` days before it.
pub async fn feedback_before(
    client: &impl GenericClient,
    until: DateTime<Utc>,
    days: i32,
    policy: &Policy,
    share: f64,
) -> Result<FromTickets> {
    let params: [&(dyn ToSql + Sync); 4] = [&ANY_WINDOW, &policy.departments, &until, &days];
    read(
        client,
        &before(FEEDBACK, 2),
        &params,
        share,
        FEEDBACK_WEIGHT,
    )
    .await
}

fn example(row: &tokio_postgres::Row, weight: f32) -> Example {
    Example {
        subject: row.get(0),
        message: row.get(1),
        department: row.get(2),
        is_urgent: row.get(3),
        weight,
    }
}

/// One example per text: where the desk corrected a ticket the model also answered, the desk's
/// label stands (whatever the order the sources were named in); otherwise the first one.
pub fn merge(sources: Vec<Vec<Example>>) -> Vec<Example> {
    let mut at = std::collections::HashMap::new();
    let mut merged: Vec<Example> = Vec::new();
    for example in sources.into_iter().flatten() {
        let text = (example.subject.clone(), example.message.clone());
        match at.get(&text) {
            Some(&i) => {
                let kept: &mut Example = &mut merged[i];
                if example.weight > kept.weight {
                    *kept = example;
                }
            }
            None => {
                at.insert(text, merged.len());
                merged.push(example);
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(text: &str, department: &str, weight: f32) -> Example {
        Example {
            subject: text.into(),
            message: "m".into(),
            department: department.into(),
            is_urgent: false,
            weight,
        }
    }

    #[test]
    fn no_owner_gives_more_than_its_share_and_a_single_owner_is_not_capped() {
        let cases: [(&[i64], f64, Option<i64>); 8] = [
            (&[], 0.2, None),
            (&[1000], 0.2, None),
            // Two owners: no more than an equal share.
            (&[1000, 10], 0.2, Some(10)),
            (&[10, 10], 0.2, None),
            // Five or more: a fifth at most.
            (&[1000, 10, 10, 10, 10, 10], 0.2, Some(12)),
            (&[10; 6], 0.2, None),
            (&[1000, 10, 10, 10, 10, 10], 1.0, None),
            (&[100, 100, 0], 0.2, None),
        ];
        for (counts, share, cap) in cases {
            assert_eq!(owner_cap(counts, share), cap, "{counts:?} {share}");
            if let Some(c) = cap {
                let total: i64 = counts.iter().map(|&n| n.min(c)).sum();
                let owners = counts.iter().filter(|&&n| n > 0).count() as f64;
                assert!(c as f64 <= share.max(1.0 / owners) * total as f64 + 1e-9);
            }
        }
    }

    #[test]
    fn one_example_per_text_and_the_desks_label_stands_over_the_models() {
        let model = vec![example("a", "billing", 1.0), example("b", "sales", 1.0)];
        let desk = vec![example("a", "account", FEEDBACK_WEIGHT)];
        for sources in [vec![model.clone(), desk.clone()], vec![desk, model]] {
            let merged = merge(sources);
            assert_eq!(merged.len(), 2);
            let a = merged.iter().find(|e| e.subject == "a").unwrap();
            assert_eq!(a.department, "account");
        }
    }
}
