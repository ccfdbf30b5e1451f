//! Leases that follow the work (SQS's visibility extended while a consumer works): a claim's
//! lease is short, and the invocation that holds rows renews all their leases in one
//! statement every third of it, fenced by their claim tokens. A crashed invocation renews
//! nothing, so its rows come back within one lease: any claimer returns the expired leases it
//! finds before it claims ([`Expired`], at most once a renewal period), besides the sweeper.
//!
//! A renewal that fails because the database is away is tried again at the next tick; the
//! rows stay held meanwhile, as a lease always was. A row whose renewal comes back without it
//! was lost (it expired and was returned, or another holds it now): [`Held::lost`] tells the
//! job before it spends anything, and its fenced writes would change nothing anyway.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
    time::{Duration, Instant},
};

use deadpool_postgres::{GenericClient, Pool};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::lease::{self, Queue};
use crate::{db, domain::error::Result, telemetry::metric};

/// The rows of one queue an invocation holds, with their claim tokens, and those it lost.
#[derive(Debug)]
pub struct Held {
    queue: Queue,
    tokens: Mutex<HashMap<i64, Uuid>>,
    lost: Mutex<HashSet<i64>>,
}

impl Held {
    pub fn new(queue: Queue) -> Self {
        Self {
            queue,
            tokens: Mutex::default(),
            lost: Mutex::default(),
        }
    }

    /// From its claim: the row is renewed until [`Held::release`].
    pub fn hold(&self, id: i64, claim_token: Uuid) {
        self.tokens
            .lock()
            .expect("held rows")
            .insert(id, claim_token);
    }

    /// Its turn ended (written, given back or abandoned): no longer renewed.
    pub fn release(&self, id: i64) {
        self.tokens.lock().expect("held rows").remove(&id);
        self.lost.lock().expect("lost rows").remove(&id);
    }

    /// Whether a renewal found the row no longer ours.
    pub fn lost(&self, id: i64) -> bool {
        self.lost.lock().expect("lost rows").contains(&id)
    }

    fn snapshot(&self) -> (Vec<i64>, Vec<Uuid>) {
        self.tokens
            .lock()
            .expect("held rows")
            .iter()
            .map(|(id, token)| (*id, *token))
            .unzip()
    }

    /// Rows asked for and not renewed are lost; a row released meanwhile is not recorded.
    fn renewed(&self, asked: &[i64], kept: &[i64]) -> usize {
        let kept: HashSet<&i64> = kept.iter().collect();
        let tokens = self.tokens.lock().expect("held rows");
        let mut lost = self.lost.lock().expect("lost rows");
        let before = lost.len();
        for id in asked.iter().filter(|id| !kept.contains(id)) {
            if tokens.contains_key(id) {
                lost.insert(*id);
            }
        }
        lost.len() - before
    }
}

/// How `keep_renewed` ticks: the lease every renewal takes, and the attempts after which an
/// expired row it returns is dead (`TRIAGE_MAX_ATTEMPTS`; deliveries end by age instead).
#[derive(Debug, Clone, Copy)]
pub struct Renewal {
    pub lease: Duration,
    pub max_attempts: i32,
}

impl Renewal {
    /// A third of the lease: two renewals may fail (a slow round trip, a blink) before a
    /// live holder loses a row.
    pub fn period(&self) -> Duration {
        self.lease / 3
    }
}

/// Until `done`: every [`Renewal::period`], renews what `held` holds. Errors are logged and
/// the next tick tries again: a renewal never ends an invocation.
pub async fn keep_renewed(pool: &Pool, held: &Held, renewal: Renewal, done: &CancellationToken) {
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep(renewal.period()) => {}
        }
        if let Err(error) = tick(pool, held, renewal).await {
            tracing::warn!(error = %error.report(), "leases not renewed: tried again next tick");
        }
    }
}

async fn tick(pool: &Pool, held: &Held, renewal: Renewal) -> Result<()> {
    let (ids, tokens) = held.snapshot();
    if ids.is_empty() {
        return Ok(());
    }
    let client = db::client(pool).await?;
    let kept = lease::renew(&client, held.queue, (&ids, &tokens), renewal.lease).await?;
    let lost = held.renewed(&ids, &kept);
    if lost > 0 {
        metric::leases_lost(lost as u64);
        tracing::warn!(
            lost,
            "leases lost before renewal: those jobs are fenced out"
        );
    }
    Ok(())
}

/// A claimer's return of a queue's expired leases, at most once a renewal period per process:
/// a crashed holder's rows are back within about one lease wherever claims are made, without
/// waiting for the sweeper's schedule (a minute or more).
#[derive(Debug)]
pub struct Expired {
    queue: Queue,
    renewal: Renewal,
    last: Mutex<Option<Instant>>,
}

impl Expired {
    pub fn new(queue: Queue, renewal: Renewal) -> Self {
        Self {
            queue,
            renewal,
            last: Mutex::default(),
        }
    }

    /// Returns the expired leases if a renewal period has passed since this process last did.
    pub async fn return_due(&self, client: &impl GenericClient) -> Result<()> {
        {
            let mut last = self.last.lock().expect("last return");
            let now = Instant::now();
            if last.is_some_and(|at| now < at + self.renewal.period()) {
                return Ok(());
            }
            *last = Some(now);
        }
        let (returned, dead) =
            lease::return_expired(client, self.queue, self.renewal.max_attempts).await?;
        if returned + dead > 0 {
            tracing::warn!(returned, dead, "expired leases returned before a claim");
            lease::count_expired(returned, dead);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_missing_from_a_renewal_is_lost_unless_its_turn_ended_meanwhile() {
        let held = Held::new(Queue::Evaluation);
        for id in 1..=3 {
            held.hold(id, Uuid::new_v4());
        }
        let (asked, _) = held.snapshot();
        // Row 3's turn ends while the renewal is under way.
        held.release(3);
        assert_eq!(held.renewed(&asked, &[1]), 1);
        assert!(!held.lost(1));
        assert!(held.lost(2));
        assert!(!held.lost(3));
        held.release(2);
        assert!(!held.lost(2));
        assert_eq!(held.snapshot().0, vec![1]);
    }

    #[test]
    fn a_lease_is_renewed_three_times_per_length() {
        let renewal = Renewal {
            lease: Duration::from_secs(15),
            max_attempts: 5,
        };
        assert_eq!(renewal.period(), Duration::from_secs(5));
    }
}
