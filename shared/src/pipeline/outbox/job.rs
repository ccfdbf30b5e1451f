//! A claimed job and the only ways its state changes: each method is one statement that
//! names the claim token, so a worker whose lease expired writes nothing (underway's
//! `InProgressTask`). Every job runs one of them, so their statements are prepared once per
//! connection (deadpool's statement cache).

use std::time::Duration;

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::{
    lease::{bounded, Lease, Queue},
    Fencing, Lane, OutboxId,
};
use crate::{
    domain::{
        error::Result,
        key::IdempotencyKey,
        ticket::TicketId,
        versions::{PolicyVersion, VersionPair},
    },
    pipeline::answering::Policies,
    providers::{Evaluation, EvaluationRequest, PriceTable, Tier},
};

/// A claimed job, with what the provider needs to evaluate it.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub id: OutboxId,
    pub ticket_id: TicketId,
    pub key: IdempotencyKey,
    pub versions: VersionPair,
    /// Attempts including this one (the claim counts it).
    pub attempts: i32,
    pub claim_token: Uuid,
    pub subject: String,
    pub message: String,
    pub lane: Lane,
    /// The policy (built-in or a stored taxonomy) the job was ingested under, which its answer
    /// is held to (`pipeline::answering`).
    pub policy_version: PolicyVersion,
}

/// Closes the job if this worker still holds it: `$1` id, `$2` claim token, `$3` how it
/// finished. A macro so the statement below can embed it.
macro_rules! mark_done {
    () => {
        r#"
UPDATE evaluation_outbox
SET status = 'done', finished_by = $3, finished_at = now(),
    locked_by = NULL, locked_until = NULL, last_error = NULL, error_class = NULL
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
"#
    };
}

/// A dedup hit: closes the job and announces the existing result to the subscribers of the
/// job's tickets (delivery fan-out, folded into this statement: no extra round trip).
const MARK_DONE_AND_ANNOUNCE: &str = concat!(
    "WITH done AS (",
    mark_done!(),
    "    RETURNING idempotency_key\n)",
    crate::pipeline::outbox::announce::announce_done!(),
    "SELECT count(*) FROM done\n"
);

/// One statement, so one round trip and one transaction (article step 4, rule 8): the result
/// is stored only if the job was still ours to close. Answers how many jobs it closed (0:
/// fenced out, nothing stored). The result names the job's ticket as it is now: an erasure
/// may have handed the job to another ticket of the same content while the call ran.
/// The delivery fan-out (`announced`, one row per subscriber, none without subscribers) rides
/// in the same statement, so an event exists exactly when its result is committed.
const STORE_RESULT_AND_MARK_DONE: &str = concat!(
    "WITH done AS (",
    mark_done!(),
    r#"    RETURNING id, ticket_id, idempotency_key
), stored AS (
    INSERT INTO evaluation_result
        (idempotency_key, ticket_id, is_urgent, department, urgency_score,
         model_version, prompt_version, policy_version, answered_by)
    SELECT $4, done.ticket_id, $5, $6, $7, $8, $9, $10, $11 FROM done
    ON CONFLICT (idempotency_key) DO NOTHING
)"#,
    crate::pipeline::outbox::announce::announce_done!(),
    "SELECT count(*) FROM done\n"
);

/// Back to the queue when the fault is the provider's as a whole or the invocation ran out of
/// time: the attempt the claim counted is given back.
const RELEASE: &str = r#"
UPDATE evaluation_outbox
SET status = 'pending', available_at = now() + make_interval(secs => $3),
    locked_by = NULL, locked_until = NULL, claim_token = NULL,
    attempts = greatest(attempts - 1, 0),
    last_error = coalesce($4, last_error)
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
"#;

/// Back to the queue from a provider batch whose line failed, expired or was cancelled: for the
/// online path only, without spending the attempt.
const FALL_BACK_ONLINE: &str = r#"
UPDATE evaluation_outbox
SET status = 'pending', available_at = now(),
    locked_by = NULL, locked_until = NULL, claim_token = NULL,
    attempts = greatest(attempts - 1, 0), online_only = true, batch_submission_id = NULL,
    last_error = coalesce($3, last_error)
WHERE id = $1 AND claim_token = $2 AND status = 'processing'
"#;

impl ClaimedJob {
    /// The most this job's call may cost at `tier` (its worst-case input under its prompt and
    /// policy, and the output cap, at its model's price): what the daily budget holds for it
    /// from its claim until its usage is known. Its policy as `policies` has it now
    /// (`Policies::for_estimate`); 0 for a prompt this build does not know (no call is made).
    pub fn worst_case_usd(
        &self,
        (policies, configured): (&Policies, &str),
        prices: &PriceTable,
        tier: Tier,
    ) -> f64 {
        let answering = policies.for_estimate(self.policy_version.as_str(), configured);
        let Some(prompt) = answering.prompt(&self.versions.prompt_version) else {
            return 0.0;
        };
        let request = EvaluationRequest {
            subject: &self.subject,
            message: &self.message,
            prompt,
            model: &self.versions.model_version,
            policy: &answering.policy,
            // A timeout only bounds the call, never its estimate.
            timeout: Duration::ZERO,
            tier,
        };
        let usage = request.worst_case_usage();
        prices.cost(self.versions.model_version.model(), usage, tier)
    }

    /// A claimed job from a row of `id, ticket_id, idempotency_key, prompt_version,
    /// model_version, attempts, claim_token, subject, message, lane, policy_version`.
    pub(super) fn from_row(row: &tokio_postgres::Row) -> Self {
        Self {
            id: OutboxId(row.get(0)),
            ticket_id: TicketId(row.get(1)),
            key: IdempotencyKey::from_stored(row.get(2)),
            versions: VersionPair {
                prompt_version: row.get(3),
                model_version: row.get(4),
            },
            attempts: row.get(5),
            claim_token: row.get(6),
            subject: row.get(7),
            message: row.get(8),
            lane: Lane::from_stored(row.get(9)),
            policy_version: row.get(10),
        }
    }

    /// Whether a result for this key exists already (article step 4, before any call).
    pub async fn result_exists(&self, client: &impl GenericClient) -> Result<bool> {
        let statement = client
            .prepare_cached("SELECT 1 FROM evaluation_result WHERE idempotency_key = $1")
            .await?;
        let row = client.query_opt(&statement, &[&self.key.as_str()]).await?;
        Ok(row.is_some())
    }

    /// Stores the evaluation, under the job's policy, and closes the job, atomically.
    pub async fn complete(
        &self,
        client: &impl GenericClient,
        evaluation: &Evaluation,
    ) -> Result<Fencing> {
        let statement = client.prepare_cached(STORE_RESULT_AND_MARK_DONE).await?;
        let row = client
            .query_one(
                &statement,
                &[
                    &self.id.0,
                    &self.claim_token,
                    &"evaluated",
                    &self.key.as_str(),
                    &evaluation.is_urgent,
                    &evaluation.department,
                    &evaluation.urgency_score,
                    &self.versions.model_version,
                    &self.versions.prompt_version,
                    &self.policy_version,
                    &evaluation.answered_by.as_str(),
                ],
            )
            .await?;
        Ok(Fencing::from_rows(row.get::<_, i64>(0) as u64))
    }

    /// Closes a job whose result already exists, without a model call.
    pub async fn complete_from_existing_result(
        &self,
        client: &impl GenericClient,
    ) -> Result<Fencing> {
        let statement = client.prepare_cached(MARK_DONE_AND_ANNOUNCE).await?;
        let row = client
            .query_one(&statement, &[&self.id.0, &self.claim_token, &"dedup"])
            .await?;
        Ok(Fencing::from_rows(row.get::<_, i64>(0) as u64))
    }

    /// Back to the queue after a transient failure (the shared fenced statement).
    pub async fn reschedule(
        &self,
        client: &impl GenericClient,
        delay: Duration,
        error: &str,
        reason: &str,
    ) -> Result<Fencing> {
        self.lease().reschedule(client, delay, error, reason).await
    }

    /// Back to the queue without spending the attempt the claim counted.
    pub async fn release(
        &self,
        client: &impl GenericClient,
        delay: Duration,
        error: Option<&str>,
    ) -> Result<Fencing> {
        let statement = client.prepare_cached(RELEASE).await?;
        let error = error.map(bounded);
        let rows = client
            .execute(
                &statement,
                &[&self.id.0, &self.claim_token, &delay.as_secs_f64(), &error],
            )
            .await?;
        Ok(Fencing::from_rows(rows))
    }

    /// A batch line that brought no answer: the job goes to the online path.
    pub async fn fall_back_online(
        &self,
        client: &impl GenericClient,
        error: Option<&str>,
    ) -> Result<Fencing> {
        let statement = client.prepare_cached(FALL_BACK_ONLINE).await?;
        let error = error.map(bounded);
        let rows = client
            .execute(&statement, &[&self.id.0, &self.claim_token, &error])
            .await?;
        Ok(Fencing::from_rows(rows))
    }

    /// The dead letter state: permanent failures, contract violations and exhausted attempts.
    pub async fn dead_letter(
        &self,
        client: &impl GenericClient,
        error: &str,
        reason: &str,
    ) -> Result<Fencing> {
        self.lease().dead_letter(client, error, reason).await
    }

    /// The fence, as every queue's shared statements take it.
    fn lease(&self) -> Lease {
        Lease {
            queue: Queue::Evaluation,
            id: self.id.0,
            claim_token: self.claim_token,
        }
    }
}
