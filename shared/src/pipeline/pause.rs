//! An operator's pause (`triage pause` / `resume`, the ops Lambda, the console): a switch in
//! the database, not in the deployment. The worker reads it at the start of each invocation
//! and claims nothing from a paused lane (a provider batch of the bulk lane already sent is
//! still collected: its answers are paid for); the deliverer delivers nothing while
//! deliveries are paused. Jobs and deliveries wait with no attempt spent. Oban's
//! `pause_queue` and River's queue pause work the same way (docs/runbook.md, "Pause").

use std::{fmt, str::FromStr};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::domain::error::{InvalidRequest, Result};

/// What can be paused: a lane of the evaluation outbox, or the deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pausable {
    Interactive,
    Bulk,
    Deliveries,
}

impl Pausable {
    pub const ALL: [Pausable; 3] = [Pausable::Interactive, Pausable::Bulk, Pausable::Deliveries];

    pub fn as_str(self) -> &'static str {
        match self {
            Pausable::Interactive => "interactive",
            Pausable::Bulk => "bulk",
            Pausable::Deliveries => "deliveries",
        }
    }
}

impl fmt::Display for Pausable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Pausable {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Pausable::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                InvalidRequest::new(
                    "lane",
                    format!("{s:?} is not a lane: interactive, bulk or deliveries"),
                )
            })
    }
}

/// Which lanes are paused now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Paused {
    pub interactive: bool,
    pub bulk: bool,
    pub deliveries: bool,
}

impl Paused {
    pub fn is(&self, lane: Pausable) -> bool {
        match lane {
            Pausable::Interactive => self.interactive,
            Pausable::Bulk => self.bulk,
            Pausable::Deliveries => self.deliveries,
        }
    }

    fn set(&mut self, lane: Pausable) {
        match lane {
            Pausable::Interactive => self.interactive = true,
            Pausable::Bulk => self.bulk = true,
            Pausable::Deliveries => self.deliveries = true,
        }
    }

    /// The paused lanes' names, as `triage stats --json` lists them.
    pub fn names(&self) -> Vec<&'static str> {
        Pausable::ALL
            .into_iter()
            .filter(|lane| self.is(*lane))
            .map(Pausable::as_str)
            .collect()
    }
}

/// One paused lane, as the console and the operation's report show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseEntry {
    pub lane: String,
    pub paused_at: DateTime<Utc>,
    pub paused_by: String,
    pub reason: Option<String>,
}

/// The pause's one read: a handful of rows at most, one round trip per invocation.
pub async fn paused(client: &impl GenericClient) -> Result<Paused> {
    let mut paused = Paused::default();
    for row in client.query("SELECT lane FROM pause", &[]).await? {
        if let Ok(lane) = row.get::<_, &str>(0).parse() {
            paused.set(lane);
        }
    }
    Ok(paused)
}

/// Every paused lane with who paused it, when and why.
pub async fn entries(client: &impl GenericClient) -> Result<Vec<PauseEntry>> {
    let rows = client
        .query(
            "SELECT lane, paused_at, paused_by, reason FROM pause ORDER BY paused_at, lane",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| PauseEntry {
            lane: row.get(0),
            paused_at: row.get(1),
            paused_by: row.get(2),
            reason: row.get(3),
        })
        .collect())
}

/// Pauses `lanes`; a lane paused already keeps its first pause's time, author and reason.
pub async fn pause(
    client: &impl GenericClient,
    lanes: &[Pausable],
    by: &str,
    reason: Option<&str>,
) -> Result<()> {
    let names: Vec<&str> = lanes.iter().map(|lane| lane.as_str()).collect();
    client
        .execute(
            "INSERT INTO pause (lane, paused_by, reason) SELECT unnest($1::text[]), $2, $3 \
             ON CONFLICT (lane) DO NOTHING",
            &[&names, &by, &reason],
        )
        .await?;
    Ok(())
}

/// Resumes `lanes` (paused or not).
pub async fn resume(client: &impl GenericClient, lanes: &[Pausable]) -> Result<()> {
    let names: Vec<&str> = lanes.iter().map(|lane| lane.as_str()).collect();
    client
        .execute("DELETE FROM pause WHERE lane = ANY($1)", &[&names])
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_names_a_lane_exactly_or_is_refused() {
        for lane in Pausable::ALL {
            assert_eq!(lane.as_str().parse::<Pausable>().unwrap(), lane);
        }
        for bad in ["", "Bulk", "delivery", "all", "bulk,interactive"] {
            let refused = bad.parse::<Pausable>().unwrap_err();
            assert_eq!(refused.field, "lane", "{bad:?}");
        }
    }
}
