//! The runs asked for and not yet concluded: what `triage eval --list` and the Quality page show
//! of them, and the tending (the sweeper's tick, `--list`, `promote`) that concludes those whose
//! answers are all in.

use chrono::Utc;
use deadpool_postgres::Pool;
use serde::Serialize;
use uuid::Uuid;

use super::{
    conclude,
    pending::{self, Pending},
    progress_of, runs,
    set::Split,
    Progress,
};
use crate::{db, domain::error::Result};

/// A run not yet concluded, as `triage eval --list` and the Quality page show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Running {
    pub run_id: Uuid,
    pub set_digest: String,
    pub set_source: String,
    pub split: Option<Split>,
    pub versions: Vec<String>,
    pub started_at: chrono::DateTime<Utc>,
    pub operator: String,
    pub progress: Progress,
}

/// `triage eval --list`: the runs under way, then the stored ones, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listing {
    pub running: Vec<Running>,
    pub runs: Vec<runs::StoredRun>,
}

/// The runs not yet concluded, with their progress; reads only (the Quality page's).
pub async fn under_way(pool: &Pool) -> Result<Vec<(Pending, Progress)>> {
    let running = pending::running(&db::client(pool).await?).await?;
    let mut under_way = Vec::with_capacity(running.len());
    for pending in running {
        let progress = progress_of(pool, &pending.all_keys()).await?;
        under_way.push((pending, progress));
    }
    Ok(under_way)
}

/// Concludes every pending run whose jobs are all answered or dead (the sweeper's tick,
/// `triage eval --list` and `promote` first); answers the others, with their progress.
pub async fn tend(pool: &Pool) -> Result<Vec<Running>> {
    let mut still = Vec::new();
    for (pending, progress) in under_way(pool).await? {
        if progress.finished() {
            conclude(pool, &pending, progress).await?;
        } else {
            still.push(Running::of(&pending, progress));
        }
    }
    Ok(still)
}

impl Running {
    pub fn of(pending: &Pending, progress: Progress) -> Self {
        Running {
            run_id: pending.id,
            set_digest: pending.set_digest.clone(),
            set_source: pending.set_source.clone(),
            split: pending.split,
            versions: pending.versions.iter().map(ToString::to_string).collect(),
            started_at: pending.started_at,
            operator: pending.operator.clone(),
            progress,
        }
    }
}
