//! What every claimed row is, whatever the kind of work (River's one executor for every
//! `kind`): a lease on a row of one of the queue tables, fenced by a claim token. Evaluations
//! (`evaluation_outbox`) and deliveries (`delivery`) share the columns, so they share the
//! statements here: the lease a claim takes, its renewal by the invocation holding the row
//! ([`super::renewal`]), the fenced reschedule and dead letter, and the return of expired
//! leases (the sweeper's, and every renewing invocation's).

use std::{sync::LazyLock, time::Duration};

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::Fencing;
use crate::{domain::error::Result, telemetry::metric};

/// The `SET` list of a claim: `$1` who, `$2` lease seconds. A fresh token per claim, and the
/// claim counts the attempt, so a crash (lease expiry) is an attempt too.
macro_rules! take_lease {
    () => {
        r#"status = 'processing',
        locked_by = $1,
        locked_until = now() + make_interval(secs => $2),
        leased_at = now(),
        claim_token = gen_random_uuid(),
        attempts = attempts + 1"#
    };
}
pub(crate) use take_lease;

/// The queue tables: same lease columns, different work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    Evaluation,
    Delivery,
}

impl Queue {
    fn table(self) -> &'static str {
        match self {
            Queue::Evaluation => "evaluation_outbox",
            Queue::Delivery => "delivery",
        }
    }

    fn statements(self) -> &'static Statements {
        static EVALUATION: LazyLock<Statements> =
            LazyLock::new(|| Statements::for_table(Queue::Evaluation.table()));
        static DELIVERY: LazyLock<Statements> =
            LazyLock::new(|| Statements::for_table(Queue::Delivery.table()));
        match self {
            Queue::Evaluation => &EVALUATION,
            Queue::Delivery => &DELIVERY,
        }
    }
}

struct Statements {
    renew: String,
    reschedule: String,
    dead_letter: String,
    return_expired: String,
}

impl Statements {
    fn for_table(table: &str) -> Self {
        // Every write after the claim names the token: a late holder changes nothing.
        let fenced = "WHERE id = $1 AND claim_token = $2 AND status = 'processing'";
        Self {
            // `$1` ids and `$2` their claim tokens, `$3` lease seconds: the rows still held
            // come back; a row finished, returned or claimed by another is not touched.
            renew: format!(
                "UPDATE {table} AS q
                 SET locked_until = now() + make_interval(secs => $3), leased_at = now()
                 FROM unnest($1::bigint[], $2::uuid[]) AS held(id, claim_token)
                 WHERE q.id = held.id AND q.claim_token = held.claim_token
                   AND q.status = 'processing'
                 RETURNING q.id"
            ),
            // Back to the queue after a failure: the attempt is spent, `available_at` follows
            // the backoff.
            reschedule: format!(
                "UPDATE {table}
                 SET status = 'pending', available_at = now() + make_interval(secs => $3),
                     locked_by = NULL, locked_until = NULL, claim_token = NULL,
                     last_error = $4, error_class = $5
                 {fenced}"
            ),
            // Not a graveyard: `error_class` groups the report, `last_error` says what happened.
            dead_letter: format!(
                "UPDATE {table}
                 SET status = 'dead', finished_at = now(),
                     locked_by = NULL, locked_until = NULL, claim_token = NULL,
                     last_error = $3, error_class = $4
                 {fenced}"
            ),
            // One conditional statement: a row that finished between any read and this write
            // no longer matches `status = 'processing'` when Postgres re-checks it under the row
            // lock, so it is never touched (the race of riverqueue/river#1302). Clearing the
            // claim token fences the late holder.
            return_expired: format!(
                "WITH expired AS (
                    UPDATE {table}
                    SET status       = CASE WHEN attempts >= $1 THEN 'dead' ELSE 'pending' END,
                        finished_at  = CASE WHEN attempts >= $1 THEN now() END,
                        available_at = now(),
                        locked_by = NULL, locked_until = NULL, claim_token = NULL,
                        last_error   = CASE WHEN attempts >= $1
                                            THEN format('lease expired on attempt %s of %s (worker %s)', attempts, $1, locked_by)
                                            ELSE format('lease expired (worker %s)', locked_by) END,
                        error_class  = 'lease_expired'
                    WHERE status = 'processing' AND locked_until < now()
                      -- A lease running when the server (re)started could not be renewed
                      -- while it was away: it runs again, for its own length, from the start.
                      AND (leased_at IS NULL
                           OR leased_at >= pg_postmaster_start_time()
                           OR pg_postmaster_start_time() + (locked_until - leased_at) < now())
                    RETURNING status
                )
                SELECT count(*) FILTER (WHERE status = 'pending'),
                       count(*) FILTER (WHERE status = 'dead')
                FROM expired"
            ),
        }
    }
}

/// A claimed row of `queue`: the fence every later write presents.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    pub queue: Queue,
    pub id: i64,
    pub claim_token: Uuid,
}

impl Lease {
    pub async fn reschedule(
        &self,
        client: &impl GenericClient,
        delay: Duration,
        error: &str,
        reason: &str,
    ) -> Result<Fencing> {
        let statement = client
            .prepare_cached(&self.queue.statements().reschedule)
            .await?;
        let rows = client
            .execute(
                &statement,
                &[
                    &self.id,
                    &self.claim_token,
                    &delay.as_secs_f64(),
                    &bounded(error),
                    &reason,
                ],
            )
            .await?;
        Ok(Fencing::from_rows(rows))
    }

    pub async fn dead_letter(
        &self,
        client: &impl GenericClient,
        error: &str,
        reason: &str,
    ) -> Result<Fencing> {
        let statement = client
            .prepare_cached(&self.queue.statements().dead_letter)
            .await?;
        let rows = client
            .execute(
                &statement,
                &[&self.id, &self.claim_token, &bounded(error), &reason],
            )
            .await?;
        Ok(Fencing::from_rows(rows))
    }
}

/// Renews the leases of `held` rows of `queue` (ids with their claim tokens) for `lease`
/// from now, in one statement. Answers the ids still held: the others were lost (returned as
/// expired, or claimed since by another).
pub async fn renew(
    client: &impl GenericClient,
    queue: Queue,
    (ids, tokens): (&[i64], &[Uuid]),
    lease: Duration,
) -> Result<Vec<i64>> {
    let statement = client.prepare_cached(&queue.statements().renew).await?;
    let rows = client
        .query(&statement, &[&ids, &tokens, &lease.as_secs_f64()])
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Returns `queue`'s expired leases (the holder died): back to pending, or dead at
/// `max_attempts`. Answers (returned, dead-lettered).
pub async fn return_expired(
    client: &impl GenericClient,
    queue: Queue,
    max_attempts: i32,
) -> Result<(i64, i64)> {
    let row = client
        .query_one(&queue.statements().return_expired, &[&max_attempts])
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// The metrics of evaluation leases returned as expired, whoever returned them (the sweeper, or
/// a claimer before its claim): `returned` back to pending, `dead` at the last attempt.
pub(crate) fn count_expired(returned: i64, dead: i64) {
    metric::lease_expired(returned + dead);
    metric::dead_letters("lease_expired", dead);
}

/// `last_error` is bounded, as in the article.
pub(crate) fn bounded(error: &str) -> String {
    error.chars().take(500).collect()
}
