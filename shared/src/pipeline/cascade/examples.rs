//! What trains a local classifier, from the database: the large model's own answers
//! (distillation; never the classifier's own, never eval work) and the help desk's
//! corrections. A labelled set's dev rows come from `operations::train`. Erased tickets are
//! gone from both, so they never train the next classifier.

use deadpool_postgres::GenericClient;

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

/// Production results answered by a model under the policy `$4` in the last `days` days, one
/// per content, with the text of the ticket they name, the newest first; `urgent_threshold`
/// turns the answer's `is_urgent` into a label. A classifier learns one taxonomy.
const RESULTS: &str = r#"
SELECT t.subject, t.message, r.department, r.is_urgent >= $2, t.id
FROM evaluation_result r
JOIN ticket t ON t.id = r.ticket_id AND t.workload = 'production'
WHERE r.computed_at > now() - make_interval(days => $1) AND r.answered_by = 'model'
  AND r.policy_version = $4
ORDER BY r.computed_at DESC, r.idempotency_key
LIMIT $3
"#;

/// The desk's current labels given in the last `days` days in the policy's departments (`$3`;
/// labels given under another taxonomy are not this classifier's).
const FEEDBACK: &str = r#"
SELECT t.subject, t.message, f.department, f.is_urgent, t.id
FROM ticket_feedback f
JOIN ticket t ON t.id = f.ticket_id
WHERE f.superseded_at IS NULL AND f.created_at > now() - make_interval(days => $1)
  AND f.department = ANY ($3::text[])
ORDER BY f.created_at DESC, f.id
LIMIT $2
"#;

/// Examples read from production tickets, with the tickets they were read from (recorded
/// with the classifier, `trained_on`, for erasure).
#[derive(Debug, Default)]
pub struct FromTickets {
    pub examples: Vec<Example>,
    pub tickets: Vec<uuid::Uuid>,
}

impl FromTickets {
    fn of(rows: &[tokio_postgres::Row], weight: f32) -> Self {
        Self {
            examples: rows.iter().map(|row| example(row, weight)).collect(),
            tickets: rows.iter().map(|row| row.get(4)).collect(),
        }
    }
}

pub async fn results(
    client: &impl GenericClient,
    days: i32,
    policy: &Policy,
) -> Result<FromTickets> {
    let limit = MAX_EXAMPLES_PER_SOURCE;
    let threshold = policy.urgent_threshold;
    let rows = client
        .query(RESULTS, &[&days, &threshold, &limit, &policy.version])
        .await?;
    Ok(FromTickets::of(&rows, 1.0))
}

pub async fn feedback(
    client: &impl GenericClient,
    days: i32,
    policy: &Policy,
) -> Result<FromTickets> {
    let limit = MAX_EXAMPLES_PER_SOURCE;
    let rows = client
        .query(FEEDBACK, &[&days, &limit, &policy.departments])
        .await?;
    Ok(FromTickets::of(&rows, FEEDBACK_WEIGHT))
}

/// What [`results`] would read (rows, bytes of text), counted without reading it: the ops
/// Lambda refuses a training that would not fit its memory before it starts.
pub async fn results_size(
    client: &impl GenericClient,
    days: i32,
    policy: &Policy,
) -> Result<(i64, i64)> {
    let (limit, threshold) = (MAX_EXAMPLES_PER_SOURCE, policy.urgent_threshold);
    size(
        client,
        RESULTS,
        &[&days, &threshold, &limit, &policy.version],
    )
    .await
}

/// What [`feedback`] would read, counted without reading it.
pub async fn feedback_size(
    client: &impl GenericClient,
    days: i32,
    policy: &Policy,
) -> Result<(i64, i64)> {
    let limit = MAX_EXAMPLES_PER_SOURCE;
    size(client, FEEDBACK, &[&days, &limit, &policy.departments]).await
}

async fn size(
    client: &impl GenericClient,
    query: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<(i64, i64)> {
    let counted = format!(
        "SELECT count(*), coalesce(sum(octet_length(s.subject) + octet_length(s.message)), 0)::int8
         FROM ({query}) AS s (subject, message, department, is_urgent, ticket_id)"
    );
    let row = client.query_one(&counted, params).await?;
    Ok((row.get(0), row.get(1)))
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
