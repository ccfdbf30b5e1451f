//! The Zendesk write-back (docs/zendesk.md): one more delivery target on this outbox, claimed,
//! leased, fenced and retried like a webhook. A delivery reads the Zendesk ticket, decides the
//! update with [`plan`] (a pure function of the ticket as read, the answer and what the
//! connector wrote before) and sends it as Zendesk's safe update: a 409 means an agent changed
//! the ticket since the read, so it is read again and decided again (never resent blindly).
//! Every request first takes a slot of the account's rate limit, one row shared by every
//! deliverer (`limits::rate_limit`, `TRIAGE_ZENDESK_RPM`), and each update one of the updates'
//! own too (`TRIAGE_ZENDESK_UPDATE_RPM`, 80: Zendesk's 100 a minute less the agents' saves). A
//! 429 holds every deliverer for its `Retry-After` (a 429 to an update, the updates only), and
//! the delivery is retried no earlier.

use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::OnceCell;

use super::{claimed::ClaimedDelivery, decision::Attempt};
use crate::{
    config::RateLimitPolicy,
    connectors::zendesk::{
        api::{ApiError, Client, Ticket, Update},
        ZendeskConfig,
    },
    db,
    domain::error::{ConfigError, Result},
    pipeline::{
        limits::rate_limit::{self, Pace, Settlement, Take, DEFAULT_HOLD},
        zendesk::{
            corrections,
            groups::Mapping,
            written::{self, Written},
        },
    },
};

/// Reads and decisions one delivery may make while agents keep editing the ticket.
const MAX_CONFLICTS: usize = 3;
pub const PROVISIONAL_TAG: &str = "triage_provisional";
pub const URGENT_TAG: &str = "triage_urgent";

/// The answer as the update needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer<'a> {
    pub department: &'a str,
    pub urgent: bool,
    pub provisional: bool,
    /// The department's group in the answer's taxonomy (`None`: no group is written).
    pub group: Option<i64>,
}

/// The tag of a department (Zendesk tags are lower case, without spaces).
pub fn department_tag(department: &str) -> String {
    let slug: String = department
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    format!("triage_{slug}")
}

/// The update for `ticket` as read, and what will have been written once it is applied.
/// Tags are only added and removed (ours), never replaced. The group and the priority are
/// written only while the ticket still has what we left (nothing written yet: any priority, but
/// no group an agent set): an agent's edit stays, whatever a later answer says. Urgent raises
/// the priority to `urgent`; a raise the next answer does not confirm is undone, to `null` when
/// the ticket had none (Zendesk's default).
pub fn plan(ticket: &Ticket, answer: &Answer<'_>, before: &Written) -> (Update, Written) {
    let mut wanted = vec![department_tag(answer.department)];
    if answer.urgent {
        wanted.push(URGENT_TAG.into());
    }
    if answer.provisional {
        wanted.push(PROVISIONAL_TAG.into());
    }
    let has = |tag: &String| ticket.tags.contains(tag);
    let additional_tags = wanted.iter().filter(|t| !has(t)).cloned().collect();
    let remove_tags = before
        .tags
        .iter()
        .filter(|t| !wanted.contains(t) && has(t))
        .cloned()
        .collect();
    // `before.group_id` is only ever a group we set: equal, nobody regrouped it since.
    let group_ours = ticket.group_id == before.group_id;
    let group_id = answer
        .group
        .filter(|&g| group_ours && ticket.group_id != Some(g));
    let current = &ticket.priority;
    let priority_ours = before.at.is_none() || *current == before.priority;
    // (what to send: `Some(None)` is `null`; we raised it; from what)
    let (priority, priority_raised, priority_before) = match (priority_ours, answer.urgent) {
        // An agent's since our last update: theirs, and nothing of ours is left to undo.
        (false, _) => (None, false, None),
        (true, true) if current.as_deref() == Some("urgent") => {
            (None, before.priority_raised, before.priority_before.clone())
        }
        (true, true) => (Some(Some("urgent".to_string())), true, current.clone()),
        (true, false) if before.priority_raised => {
            (Some(before.priority_before.clone()), false, None)
        }
        (true, false) => (None, false, None),
    };
    let written = Written {
        group_id: if group_ours {
            group_id.or(ticket.group_id)
        } else {
            before.group_id
        },
        // An agent's priority keeps differing from what we left, so it stays theirs.
        priority: match (&priority, priority_ours) {
            (Some(sent), _) => sent.clone(),
            (None, true) => current.clone(),
            (None, false) => before.priority.clone(),
        },
        priority_raised,
        priority_before,
        tags: wanted,
        ..before.clone()
    };
    let update = Update {
        group_id,
        priority,
        additional_tags,
        remove_tags,
        safe_update: true,
        updated_stamp: ticket.updated_at.clone(),
    };
    (update, written)
}

/// Solved or closed: the desk is done with it.
fn settled(ticket: &Ticket) -> bool {
    matches!(ticket.status.as_deref(), Some("solved" | "closed"))
}

/// Writes results back to the configured Zendesk account.
pub struct ZendeskWriter {
    pool: Pool,
    api: Client,
    /// The account's shared limit, keyed by its host.
    limit: String,
    pace: Pace,
    /// Within it, the ticket updates' own (`TRIAGE_ZENDESK_UPDATE_RPM`): a 429 to an update
    /// holds updates only, so reads (and the agents' saves) go on.
    updates: String,
    update_pace: Pace,
    /// How long a request may wait for its slot before the delivery is retried later.
    max_wait: Duration,
    api_user: OnceCell<i64>,
    /// `Limits::feedback_history`, for the corrections applied after a write.
    feedback_history: usize,
}

impl ZendeskWriter {
    pub fn new(
        pool: Pool,
        config: &ZendeskConfig,
        timeout: Duration,
        feedback_history: usize,
    ) -> Result<Option<Self>, ConfigError> {
        let Some(api) = config.api(timeout) else {
            return Ok(None);
        };
        let api = api.map_err(|e| ConfigError::invalid("TRIAGE_ZENDESK_URL", e.to_string()))?;
        let configured = RateLimitPolicy {
            requests_per_minute: config.requests_per_minute,
            tokens_per_minute: None,
        };
        let updates = RateLimitPolicy {
            requests_per_minute: Some(config.update_requests_per_minute),
            tokens_per_minute: None,
        };
        Ok(Some(Self {
            limit: format!("zendesk:{}", api.host()),
            pace: Pace::new(configured, RateLimitPolicy::default()),
            updates: format!("zendesk-updates:{}", api.host()),
            update_pace: Pace::new(updates, RateLimitPolicy::default()),
            pool,
            api,
            max_wait: timeout,
            api_user: OnceCell::new(),
            feedback_history,
        }))
    }

    /// One delivery's write-back, as an attempt for the delivery's decision.
    pub async fn write(&self, delivery: &ClaimedDelivery) -> Attempt {
        match self.try_write(delivery).await {
            Ok(Ok(())) => Attempt::Acknowledged,
            Ok(Err(ApiError::RateLimited { retry_after })) => Attempt::Throttled {
                after: retry_after.unwrap_or(DEFAULT_HOLD),
                error: "Zendesk's rate limit".into(),
            },
            // This update refused for this ticket (closed, or merged, which closes it): a retry
            // is refused alike, in an hour or in three days.
            Ok(Err(error @ ApiError::Unprocessable(_))) => Attempt::Rejected(error.to_string()),
            Ok(Err(error)) => Attempt::Failed(error.to_string()),
            Err(error) => Attempt::Failed(error.report()),
        }
    }

    async fn try_write(&self, delivery: &ClaimedDelivery) -> Result<Result<(), ApiError>> {
        let data = &delivery.data;
        let client = db::client(&self.pool).await?;
        // Not a desk ticket, or erased since: nothing to write.
        let Some(before) = written::of_ticket(&client, data.ticket_id).await? else {
            return Ok(Ok(()));
        };
        let mapping = Mapping::of(&client, &data.policy_version).await?;
        let answer = Answer {
            department: &data.department,
            urgent: data.is_urgent >= mapping.urgent_threshold,
            provisional: data.provisional,
            group: mapping.group_of(&data.department),
        };
        if self.api_user.get().is_none() {
            // Who we are, before our first update: its change events are ours, not corrections.
            let me = match self.call(self.api.me()).await? {
                Ok(me) => me,
                Err(error) => return Ok(Err(error)),
            };
            written::set_api_user(&client, before.account_id, me).await?;
            let _ = self.api_user.set(me);
        }
        for _ in 0..MAX_CONFLICTS {
            let ticket = match self.call(self.api.show(before.zendesk_id)).await? {
                Ok(ticket) => ticket,
                // Deleted in Zendesk: there is nothing left to write to.
                Err(ApiError::NotFound) => return Ok(Ok(())),
                Err(error) => return Ok(Err(error)),
            };
            // A promotion rewrites no history: a solved or closed ticket keeps what it was
            // solved with (and a closed one would refuse it).
            if delivery.promoted && settled(&ticket) {
                return Ok(Ok(()));
            }
            let (update, written) = plan(&ticket, &answer, &before);
            let unchanged = update.group_id.is_none()
                && update.priority.is_none()
                && update.additional_tags.is_empty()
                && update.remove_tags.is_empty();
            let sent = if unchanged {
                Ok(())
            } else {
                self.call_updating(self.api.update(before.zendesk_id, &update))
                    .await?
            };
            match sent {
                Ok(()) => {
                    written::record(&client, &written).await?;
                    // The answer is written: the agents' changes that came before it count.
                    corrections::apply_kept(
                        &self.pool,
                        self.feedback_history,
                        before.account_id,
                        before.zendesk_id,
                    )
                    .await?;
                    return Ok(Ok(()));
                }
                Err(ApiError::Conflict) => {
                    crate::telemetry::metric::zendesk_conflict();
                    written::conflicted(&client, before.account_id, before.zendesk_id).await?;
                }
                Err(error) => return Ok(Err(error)),
            }
        }
        Ok(Err(ApiError::Conflict))
    }

    /// One request within the account's shared limit: waits for its slot (or answers a 429 of
    /// our own when none opens in time), and holds every deliverer after Zendesk's 429.
    async fn call<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, ApiError>>,
    ) -> Result<Result<T, ApiError>> {
        self.within(&[(&self.limit, &self.pace)], request).await
    }

    /// An update: within the updates' own limit and the account's; Zendesk's 429 to it holds
    /// the updates only.
    async fn call_updating<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, ApiError>>,
    ) -> Result<Result<T, ApiError>> {
        let limits = [
            (&self.updates, &self.update_pace),
            (&self.limit, &self.pace),
        ];
        self.within(&limits, request).await
    }

    /// `request` once a slot of each of `limits` is taken, in order; a 429 settles the first.
    async fn within<T>(
        &self,
        limits: &[(&String, &Pace)],
        request: impl std::future::Future<Output = Result<T, ApiError>>,
    ) -> Result<Result<T, ApiError>> {
        let client = db::client(&self.pool).await?;
        for (limit, pace) in limits {
            match rate_limit::take(&client, limit, pace, 0, self.max_wait).await? {
                Take::Reserved { wait } => tokio::time::sleep(wait).await,
                Take::Full { opens_in } => {
                    return Ok(Err(ApiError::RateLimited {
                        retry_after: Some(opens_in),
                    }))
                }
            }
        }
        let answer = request.await;
        if let Err(ApiError::RateLimited { retry_after }) = &answer {
            let (limit, pace) = limits[0];
            let settlement = Settlement::refused(0, *retry_after);
            rate_limit::settle(&client, limit, pace, settlement).await?;
        }
        Ok(answer)
    }
}

#[cfg(test)]
#[path = "zendesk_tests.rs"]
mod tests;
