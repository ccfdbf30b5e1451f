//! A batch line's ledger row and its job's write: an answer through the contract and the
//! same fenced write as an online one, a line with no answer back to the online path.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use super::BatchTier;
use crate::{
    db,
    domain::error::{Error, Result},
    pipeline::{
        ledger::{self, CallId, CallOutcome, CallRecord},
        outbox::ClaimedJob,
        turn::{self, carry_out, dedup_hit},
    },
    providers::{ProviderError, ProviderReply, Tier},
};

impl BatchTier {
    /// A line's ledger row, costed at the batch price's estimate until its result is in;
    /// `None` when a result for its key exists (article step 4). A batch takes nothing of the
    /// online rate limit, so no slot is asked for.
    pub async fn start_line(
        &self,
        client: &db::Client,
        job: &ClaimedJob,
    ) -> Result<Option<CallId>> {
        let caller = (self.caller.as_str(), self.client.provider_name());
        let estimate_usd = self.estimate_usd(job);
        ledger::start_without_slot(client, job, caller, estimate_usd, Tier::Batch).await
    }

    /// An answered line: the contract, the ledger at the batch price, and the job's fenced
    /// write, as for an online answer; not the breaker, which guards the online endpoint.
    pub(super) async fn complete_line(
        &self,
        job: &ClaimedJob,
        call: Option<CallId>,
        reply: &ProviderReply,
    ) -> Result<()> {
        let client = db::client(&self.pool).await?;
        let call = match call {
            Some(call) => call,
            None => match self.start_line(&client, job).await? {
                Some(call) => call,
                None => {
                    dedup_hit(&client, job).await?;
                    return Ok(());
                }
            },
        };
        // Taxonomies are never removed: one that cannot be read is the database's fault, and
        // the next tick collects the line again.
        let policy = self.policies.get(&self.pool, job.policy_version.as_str());
        let answering = policy
            .await?
            .map_err(|unusable| Error::unavailable("taxonomy", unusable))?;
        let prices = &self.config.provider.prices;
        let batch = (Duration::ZERO, Tier::Batch);
        let policy = &answering.policy;
        let (record, checked) = ledger::billed_answer(job, reply, batch, policy, prices);
        let (turn, error) = turn::of_answer(&checked);
        // The batch used none of the online rate limit (no correction, no hold) and says
        // nothing about the online endpoint (the breaker is left alone).
        tokio::try_join!(
            ledger::finish_call(&client, call, &record, 0.0),
            carry_out(&client, job, turn, false, &error, &self.config),
        )?;
        Ok(())
    }

    /// A line that brought no answer: its ledger row says why (not billed), and the job goes to
    /// the online path without spending an attempt.
    pub(super) async fn back_online(
        &self,
        client: &db::Client,
        job: &ClaimedJob,
        call: Option<CallId>,
        error: Option<&ProviderError>,
    ) -> Result<()> {
        match error {
            Some(error) => self.line_failed(client, call, error).await?,
            None => {
                if let Some(call) = call {
                    let record = unbilled(CallOutcome::NotRun, None);
                    ledger::finish_call(client, call, &record, 0.0).await?;
                }
            }
        }
        let detail = error.map(ToString::to_string);
        let detail = detail.as_deref().unwrap_or("batch line not run");
        let _ = job.fall_back_online(client, Some(detail)).await?;
        Ok(())
    }

    /// A line that was never answered: its ledger row says why (not billed).
    pub async fn line_failed(
        &self,
        client: &impl GenericClient,
        call: Option<CallId>,
        error: &ProviderError,
    ) -> Result<()> {
        if let Some(call) = call {
            let record = unbilled(CallOutcome::Failed(error.kind), error.http_status);
            ledger::finish_call(client, call, &record, 0.0).await?;
        }
        Ok(())
    }
}

fn unbilled(outcome: CallOutcome, http_status: Option<u16>) -> CallRecord {
    CallRecord {
        outcome,
        http_status,
        billed: Some(false),
        usage: Default::default(),
        cost_usd: Some(0.0),
        latency: Duration::ZERO,
    }
}
