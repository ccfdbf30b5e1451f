//! Provider batch submissions (`batch_submission`): recorded with their jobs *before* the
//! batch is sent, given the provider's batch id once it has answered, collected under a short
//! lease of their own, and tended once more after they close, until the provider's copy of
//! their text is deleted. The jobs of a submission stay `processing` under their claim's
//! token, so every write to them is fenced like any other (see `worker::batch`).

use std::time::Duration;

use deadpool_postgres::GenericClient;
use serde::Serialize;

use super::{ClaimedJob, OutboxId};
use crate::domain::{error::Result, rows::CallId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmissionId(pub i64);

/// The lease of a job in a batch, the longest it stays in a submission's care: the batch's 24-hour
/// window and an hour for its collection, so the sweeper never hands a job in a live batch
/// to another worker.
pub const BATCH_LEASE: Duration = Duration::from_secs(25 * 3600);

/// A submission not yet collected, or closed with its text still at the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub id: SubmissionId,
    /// What the provider echoes back: OpenAI's metadata and file name, every custom id.
    pub reference: String,
    /// `None` while it is being sent, or after its sender died before recording the answer.
    pub provider_batch_id: Option<String>,
    pub age: Duration,
    /// Collected or abandoned: all that is left is deleting its text at the provider.
    pub closed: bool,
}

impl Submission {
    /// The custom id of a job's line: the reference, then the outbox id.
    pub fn custom_id(&self, job: OutboxId) -> String {
        format!("{}-{}", self.reference, job.0)
    }

    /// The outbox id a line of this submission stands for.
    pub fn job_of(&self, custom_id: &str) -> Option<OutboxId> {
        let id = custom_id.strip_prefix(&self.reference)?.strip_prefix('-')?;
        id.parse().ok().map(OutboxId)
    }
}

/// Records a submission of `jobs` (claimed in the same transaction) and ties them to it.
pub async fn record(
    client: &impl GenericClient,
    provider: &str,
    worker: &str,
    jobs: &[ClaimedJob],
) -> Result<Submission> {
    let ids: Vec<i64> = jobs.iter().map(|job| job.id.0).collect();
    let row = client
        .query_one(
            r#"
            WITH submission AS (
                INSERT INTO batch_submission (provider, worker, lines)
                VALUES ($1, $2, $3)
                RETURNING id, reference
            ), tied AS (
                UPDATE evaluation_outbox SET batch_submission_id = (SELECT id FROM submission)
                WHERE id = ANY($4)
            )
            SELECT id, reference FROM submission
            "#,
            &[&provider, &worker, &(ids.len() as i32), &ids],
        )
        .await?;
    Ok(Submission {
        id: SubmissionId(row.get(0)),
        reference: row.get(1),
        provider_batch_id: None,
        age: Duration::ZERO,
        closed: false,
    })
}

/// The sender is about to send: from now on, a submission still `sending` after a send's time
/// has lost its sender.
pub async fn send_started(client: &impl GenericClient, id: SubmissionId) -> Result<()> {
    client
        .execute(
            "UPDATE batch_submission SET send_started_at = now() WHERE id = $1 AND state = 'sending'",
            &[&id.0],
        )
        .await?;
    Ok(())
}

/// The provider accepted the batch (or it was found again after a crash). `false` when the
/// submission was given up meanwhile (its jobs went back to the queue): the batch just made
/// must then be cancelled, or its contents would be paid for twice.
pub async fn submitted(
    client: &impl GenericClient,
    id: SubmissionId,
    provider_batch_id: &str,
) -> Result<bool> {
    let recorded = client
        .execute(
            "UPDATE batch_submission SET state = 'submitted', provider_batch_id = $2, \
             submitted_at = now() WHERE id = $1 AND state = 'sending'",
            &[&id.0, &provider_batch_id],
        )
        .await?;
    Ok(recorded == 1)
}

/// Closes a submission: `collected` once its results are in (from `submitted`), `abandoned`
/// when it was never sent (from `sending` only: a submission its sender recorded meanwhile
/// stays). `false` when it was not in that state, and then nothing of it may be given back.
pub async fn close(client: &impl GenericClient, id: SubmissionId, collected: bool) -> Result<bool> {
    let (state, from) = match collected {
        true => ("collected", "submitted"),
        false => ("abandoned", "sending"),
    };
    let closed = client
        .execute(
            "UPDATE batch_submission SET state = $2, finished_at = now(), polled_until = NULL \
             WHERE id = $1 AND state = $3",
            &[&id.0, &state, &from],
        )
        .await?;
    Ok(closed == 1)
}

/// The batch a given-up submission's sender made anyway (and cancelled): kept, so that its
/// text is deleted at the provider like any other batch's.
pub async fn sent_after_abandoned(
    client: &impl GenericClient,
    id: SubmissionId,
    provider_batch_id: &str,
) -> Result<()> {
    client
        .execute(
            "UPDATE batch_submission SET provider_batch_id = $2 \
             WHERE id = $1 AND state = 'abandoned' AND provider_batch_id IS NULL",
            &[&id.0, &provider_batch_id],
        )
        .await?;
    Ok(())
}

/// The provider holds nothing of the submission's text any more.
pub async fn deleted_at_provider(client: &impl GenericClient, id: SubmissionId) -> Result<()> {
    client
        .execute(
            "UPDATE batch_submission SET provider_deleted_at = now(), polled_until = NULL \
             WHERE id = $1",
            &[&id.0],
        )
        .await?;
    Ok(())
}

/// A provider batch that still holds text of tickets being erased.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldAtProvider {
    /// `None` while it is being sent.
    pub batch: Option<String>,
    /// When the worker deletes it at the latest (UTC, RFC 3339), if the provider is reachable:
    /// a running batch ends within its 24-hour window and is collected and deleted by the
    /// tick after; a closed one is deleted at the next tick.
    pub deleted_by: String,
}

/// Of `submissions`, those whose text the provider still holds.
pub async fn held_at_provider(
    client: &impl GenericClient,
    submissions: &[i64],
) -> Result<Vec<HeldAtProvider>> {
    let rows = client
        .query(
            r#"
            SELECT provider_batch_id,
                   to_char(CASE WHEN state IN ('sending', 'submitted')
                                THEN created_at + make_interval(secs => $2)
                                ELSE now() END AT TIME ZONE 'UTC',
                           'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            FROM batch_submission
            WHERE id = ANY($1) AND provider_deleted_at IS NULL
              AND (state IN ('sending', 'submitted') OR provider_batch_id IS NOT NULL)
            ORDER BY id
            "#,
            &[&submissions, &BATCH_LEASE.as_secs_f64()],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| HeldAtProvider {
            batch: row.get(0),
            deleted_by: row.get(1),
        })
        .collect())
}

/// Ends this worker's turn with a submission, so the next tick may poll it again.
pub async fn put_back(client: &impl GenericClient, id: SubmissionId) -> Result<()> {
    client
        .execute(
            "UPDATE batch_submission SET polled_until = NULL WHERE id = $1",
            &[&id.0],
        )
        .await?;
    Ok(())
}

/// Takes at most `limit` submissions of `provider` that no other worker is polling, oldest
/// first, each for `lease`: the submitted ones, the ones still `sending` `sending_for` after
/// their send began (their sender is gone or gave up), and the closed ones whose batch's text
/// is still at the provider.
pub async fn take_open(
    client: &impl GenericClient,
    provider: &str,
    lease: Duration,
    sending_for: Duration,
    limit: i64,
) -> Result<Vec<Submission>> {
    let rows = client
        .query(
            r#"
            UPDATE batch_submission
            SET polled_until = now() + make_interval(secs => $2)
            WHERE id IN (
                SELECT id FROM batch_submission
                WHERE provider = $1
                  AND (state = 'submitted'
                       OR (state = 'sending'
                           AND coalesce(send_started_at, created_at) < now() - make_interval(secs => $3))
                       OR (state IN ('collected', 'abandoned') AND provider_batch_id IS NOT NULL
                           AND provider_deleted_at IS NULL))
                  AND (polled_until IS NULL OR polled_until < now())
                ORDER BY created_at
                LIMIT $4
                FOR UPDATE SKIP LOCKED
            )
            RETURNING id, reference, provider_batch_id,
                      extract(epoch FROM now() - created_at)::float8,
                      state IN ('collected', 'abandoned')
            "#,
            &[
                &provider,
                &lease.as_secs_f64(),
                &sending_for.as_secs_f64(),
                &limit,
            ],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| Submission {
            id: SubmissionId(row.get(0)),
            reference: row.get(1),
            provider_batch_id: row.get(2),
            age: Duration::from_secs_f64(row.get::<_, f64>(3).max(0.0)),
            closed: row.get(4),
        })
        .collect())
}

/// The jobs still in a submission's care (fenced: a job the sweeper took back is not among
/// them), with the ledger row of their batch line when there is one. The line's row is found
/// by the job's key (indexed in every partition) in the days since the submission, not by
/// `outbox_id` (not indexed): a search by
/// `outbox_id` scanned the day's ledger once per line, past the statement timeout for a
/// 1,000-line batch beside 20,000 calls (`scripts/bench cost`).
pub async fn jobs(
    client: &impl GenericClient,
    id: SubmissionId,
) -> Result<Vec<(ClaimedJob, Option<CallId>)>> {
    let rows = client
        .query(
            r#"
            SELECT o.id, o.ticket_id, o.idempotency_key, o.prompt_version, o.model_version,
                   o.attempts, o.claim_token, t.subject, t.message, o.lane, o.policy_version,
                   c.id, c.started_at
            FROM evaluation_outbox o JOIN ticket t ON t.id = o.ticket_id
            JOIN batch_submission s ON s.id = o.batch_submission_id
            LEFT JOIN LATERAL (
                SELECT c.id, c.started_at FROM provider_call c
                WHERE c.idempotency_key = o.idempotency_key AND c.started_at >= s.created_at
                  AND c.outbox_id = o.id AND c.attempt = o.attempts AND c.tier = 'batch'
                  AND c.outcome = 'in_flight'
                ORDER BY c.id DESC LIMIT 1
            ) c ON true
            WHERE o.batch_submission_id = $1 AND o.status = 'processing'
            "#,
            &[&id.0],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let job = ClaimedJob::from_row(&row);
            let call = row.get::<_, Option<i64>>(11).map(|id| CallId {
                id,
                started_at: row.get(12),
            });
            (job, call)
        })
        .collect())
}
