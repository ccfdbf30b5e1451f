//! `triage cascade`: the configured cascade's live precision from its audit, and the end of a
//! suspension (docs/cascade.md, "The audit" and "Suspension"). The figures are
//! `quality::live`'s.

use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};

use super::super::{audit::Operator, Outcome};
use crate::{
    config::Config,
    domain::error::{InvalidRequest, Result},
    quality::live,
};

/// What `triage cascade` does. In the ops payload: `{"op": "cascade", "action": "status"}`,
/// `"action": {"resume": {"reason": R, "force": false}}`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, clap::Subcommand)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CascadeAction {
    /// The configured cascade's audited precision over the last TRIAGE_AUDIT_WINDOW_DAYS, its
    /// exact 95% interval, the target, the local share, and whether it is suspended.
    Status,
    /// End a suspension: the classifier answers locally again. Refused while the audited
    /// upper bound is still below the target, unless --force.
    Resume {
        /// Why, for the audit trail and the suspension's history.
        #[arg(long)]
        reason: String,
        /// Resume although the bound is still below the target.
        #[arg(long)]
        #[serde(default)]
        force: bool,
    },
}

pub async fn run(
    pool: &Pool,
    config: &Config,
    action: CascadeAction,
    operator: &Operator,
) -> Result<Outcome> {
    Ok(match action {
        CascadeAction::Status => match live::status(pool, config).await? {
            Some(live) => Outcome::Cascade(Box::new(live)),
            None => {
                return Err(InvalidRequest::new(
                    "model_version",
                    "the configured model version (TRIAGE_MODEL) is no cascade".into(),
                )
                .into())
            }
        },
        CascadeAction::Resume { reason, force } => {
            let by = operator.as_str();
            let resumed = live::resume(pool, config, (by, &reason), force).await?;
            Outcome::CascadeResumed(Box::new(resumed))
        }
    })
}
