//! Provisional answers: with a cascade configured, a new ticket that cannot be evaluated now
//! (the provider's breaker is open, the day's budget is spent, or it has waited longer than
//! `TRIAGE_PROVISIONAL_AFTER_SECONDS`, behind the rate limit say) gets the local classifier's
//! answer as provisional, whatever its confidence. It is stored apart from results
//! (`provisional_result`, V26), so it never dedups a paid call and never counts as done; the
//! job stays queued and its final answer replaces it on the read side. Each is given and
//! announced once (`data.provisional: true`); the final answer is a second event.
//! The worker gives them when its claim stops at an open breaker or a spent budget, the
//! sweeper's tick to tickets that waited past the delay.

use std::{collections::HashMap, time::Duration};

use deadpool_postgres::Pool;
use uuid::Uuid;

use super::{ask, models};
use crate::{
    db,
    domain::{error::Result, versions::Versions},
    pipeline::taxonomy,
    providers::{EvaluationRequest, Prompt, Tier},
};

/// Why a ticket got a provisional answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    BreakerOpen,
    BudgetSpent,
    Waiting,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::BreakerOpen => "breaker_open",
            Reason::BudgetSpent => "budget_spent",
            Reason::Waiting => "waiting",
        }
    }
}

/// The most answers one pass gives: its transaction holds their jobs' rows.
const PER_PASS: i64 = 500;

/// New tickets' jobs of the configured cascade, still waiting after `$2` seconds, with no
/// answer yet. Their rows are locked until the answers are stored, so a worker cannot store
/// the final answer (and announce it) in between: the provisional event always comes first.
/// The queued rows are found through the claim's and the sweeper's partial indexes (pending
/// by lane, processing by lease), never by scanning the outbox's finished history. The status
/// and lane conditions are repeated on `o` for the recheck after `FOR UPDATE`: a row claimed or
/// finished in between is skipped on its new version.
const WAITING: &str = r#"
SELECT o.idempotency_key, o.ticket_id, o.prompt_version, t.subject, t.message
FROM evaluation_outbox o
JOIN ticket t ON t.id = o.ticket_id AND t.workload = 'production'
WHERE o.id IN (SELECT id FROM evaluation_outbox WHERE status = 'pending' AND lane = 'interactive'
               UNION ALL
               SELECT id FROM evaluation_outbox WHERE status = 'processing')
  AND o.status IN ('pending', 'processing') AND o.lane = 'interactive'
  AND o.model_version = $1 AND o.policy_version = $4
  AND o.created_at <= now() - make_interval(secs => $2)
  AND NOT EXISTS (SELECT 1 FROM provisional_result p WHERE p.idempotency_key = o.idempotency_key)
  AND NOT EXISTS (SELECT 1 FROM evaluation_result r WHERE r.idempotency_key = o.idempotency_key)
ORDER BY o.created_at
LIMIT $3
FOR UPDATE OF o SKIP LOCKED
"#;

/// Stores the answers and announces each one stored.
const GIVE: &str = concat!(
    r#"
WITH given AS (
    INSERT INTO provisional_result
        (idempotency_key, ticket_id, is_urgent, department, urgency_score, confidence,
         prompt_version, model_version, policy_version, reason)
    SELECT a.k, a.t, a.u, a.d, a.s, a.c, a.p, $8, $9, $10
    FROM unnest($1::text[], $2::uuid[], $3::float8[], $4::text[], $5::float8[], $6::float8[],
                $7::text[]) AS a(k, t, u, d, s, c, p)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING idempotency_key
)"#,
    crate::pipeline::outbox::announce::announce_from!(
        "given",
        "te.idempotency_key || '/provisional'",
        "true"
    ),
    "SELECT count(*) FROM given\n"
);

/// Gives provisional answers to the configured cascade's new tickets that have waited at
/// least `after` (zero when the provider cannot be asked at all), at most [`PER_PASS`].
/// Answers how many were given; nothing without a cascade configured.
pub async fn give(
    pool: &Pool,
    versions: &Versions,
    reason: Reason,
    after: Duration,
) -> Result<u64> {
    let Some(cascade) = versions.model.cascade() else {
        return Ok(0);
    };
    let mut client = db::client(pool).await?;
    // The cascade's classifier answers the deployment's taxonomy, and only its jobs.
    let policy = match taxonomy::policy(&client, versions.policy.as_str()).await? {
        Ok(policy) => policy,
        Err(unusable) => {
            tracing::warn!(error = %unusable, "no provisional answers: the taxonomy cannot be loaded");
            return Ok(0);
        }
    };
    let Some(model) = models::load(&client, &cascade.local).await? else {
        tracing::warn!(local = %cascade.local, "the cascade's classifier is not stored: no provisional answers");
        return Ok(0);
    };
    let transaction = client.transaction().await?;
    let rows = transaction
        .query(
            WAITING,
            &[
                &versions.model,
                &after.as_secs_f64(),
                &PER_PASS,
                &versions.policy,
            ],
        )
        .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let mut prompts: HashMap<String, Option<Prompt>> = HashMap::new();
    let mut given = Given::default();
    for row in &rows {
        let prompt_version: String = row.get(2);
        let prompt = prompts
            .entry(prompt_version.clone())
            .or_insert_with(|| Prompt::load(&prompt_version, &policy));
        let Some(prompt) = prompt.as_ref() else {
            continue;
        };
        let request = EvaluationRequest {
            subject: row.get(3),
            message: row.get(4),
            prompt,
            model: &versions.model,
            policy: &policy,
            timeout: Duration::ZERO,
            tier: Tier::Online,
        };
        if let Some(answer) = ask(model.clone(), request).await {
            given.keys.push(row.get(0));
            given.tickets.push(row.get(1));
            given.is_urgent.push(answer.evaluation.is_urgent);
            given.departments.push(answer.evaluation.department);
            given.urgency_scores.push(answer.evaluation.urgency_score);
            given.confidences.push(answer.confidence);
            given.prompts.push(prompt_version);
        }
    }
    let row = transaction
        .query_one(
            GIVE,
            &[
                &given.keys,
                &given.tickets,
                &given.is_urgent,
                &given.departments,
                &given.urgency_scores,
                &given.confidences,
                &given.prompts,
                &versions.model,
                &versions.policy,
                &reason.as_str(),
            ],
        )
        .await?;
    transaction.commit().await?;
    let count = row.get::<_, i64>(0) as u64;
    if count > 0 {
        tracing::info!(count, reason = reason.as_str(), "provisional answers given");
    }
    Ok(count)
}

/// The answers of one pass, as the columns `GIVE` unnests.
#[derive(Default)]
struct Given {
    keys: Vec<String>,
    tickets: Vec<Uuid>,
    is_urgent: Vec<f64>,
    departments: Vec<String>,
    urgency_scores: Vec<f64>,
    confidences: Vec<f64>,
    prompts: Vec<String>,
}
