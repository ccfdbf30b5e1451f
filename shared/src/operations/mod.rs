//! The operations on-call runs (docs/runbook.md): one [`Request`] type with one entry point,
//! [`run`], shared by the CLI (as subcommands) and the ops Lambda (as its JSON payload), so
//! both do exactly the same thing.
//! An entry-point layer: uses quality (`triage eval`: the labelled sets, their metrics, the
//! stored runs and the gate `promote` consults), the pipeline (reports), providers (prompt
//! versions), config, db and the domain.

pub mod audit;
mod checks;
mod classifiers;
mod eval;
mod feedback;
pub mod fits;
pub mod import;
pub mod promote;
pub mod redrive;
pub mod reprocess;
mod request;
pub mod shadow;
pub mod taxonomy;
mod times;

use std::time::{Duration, Instant};

use chrono::Utc;
use deadpool_postgres::Pool;
use serde::Serialize;

pub use audit::Operator;
pub use cascade::CascadeAction;
use checks::{
    chosen_policy, confirmed, known_to_this_build, no_local_files, priced, usable, within,
};
pub use classifiers::{cascade, models, retrain, train};
pub use feedback::{FeedbackItem, FeedbackItems};
pub use models::ModelsAction;
pub use request::{Request, TaxonomyAction, TaxonomyFile};
pub use times::{HumanDuration, Since};

use crate::{
    config::Config,
    domain::{
        error::{InvalidRequest, Result},
        ticket::TicketId,
        versions::{ModelVersion, VersionPair},
    },
    pipeline::{
        cascade::models::StoredModel,
        delivery,
        erase::{self, Erased},
        outbox::{claim::Serves, Lane},
        pause::{self, Pausable},
        reads::report::{self, DeadLetterGroup, Health},
        sweep::{SweepReport, Sweeper},
    },
    quality,
    telemetry::metric,
};

/// Reprocess and redrive spread new work over this window by default (article step 6).
pub const DEFAULT_SPREAD: Duration = Duration::from_secs(30 * 60);
/// Rows per statement in reprocess and redrive: one short transaction each.
pub const BATCH_SIZE: i64 = 1000;
/// How far back `dead_letters` looks by default, as the alarm does.
const DEFAULT_DEAD_LETTER_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// Reprocess and redrive of more jobs than this need `--confirm` (`"confirm": true`): each
/// queued job is a billed call, and a reprocess re-bills history.
pub const CONFIRM_ABOVE_JOBS: i64 = 1000;
/// How many rows `triage audit` lists by default, and at most.
const DEFAULT_AUDIT_ROWS: i64 = 50;
/// How many runs `triage eval --list` shows, newest first.
const LISTED_EVAL_RUNS: i64 = 50;
pub const MAX_AUDIT_ROWS: i64 = 1000;
/// Most tickets one `triage erase` takes: its transaction holds the lock on ticket links that
/// ingest waits on, so a long list would stall ingest (erase more in several runs).
pub const MAX_ERASE_TICKETS: usize = 1000;
/// The largest `redrive --limit` (larger redrives run in several steps, each confirmed).
pub const MAX_REDRIVE_LIMIT: i64 = 100_000;

/// What an operation did. Serialised as the report alone (the caller knows what it asked).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Reprocess(reprocess::Report),
    ShadowDiff(Box<shadow::ShadowDiff>),
    Promote(promote::Promotion),
    Redrive(redrive::Report),
    Stats(Health),
    DeadLetters(Vec<DeadLetterGroup>),
    Erase(Erased),
    Audit(Vec<audit::AuditEntry>),
    Eval(Box<quality::Report>),
    /// `triage eval --thresholds`.
    Sweep(Box<quality::thresholds::Sweep>),
    /// `triage eval --by-time`.
    ByTime(Box<quality::by_time::Report>),
    EvalRuns(quality::Listing),
    Deliveries(delivery::status::DeliveriesReport),
    ReplayDeliveries {
        queued: u64,
    },
    /// What is paused after a pause or a resume.
    Paused {
        paused: Vec<pause::PauseEntry>,
    },
    /// Each item's feedback as stored, and the ids no production ticket has.
    Feedback {
        given: Vec<crate::pipeline::feedback::Given>,
        not_found: Vec<TicketId>,
    },
    Trained(train::Trained),
    Models(Vec<StoredModel>),
    /// `triage models retire`.
    Retired(models::Retirement),
    Switched(crate::pipeline::cascade::switch::Switch),
    Retrained(retrain::Retrained),
    /// `triage cascade status`.
    Cascade(Box<quality::live::Live>),
    /// `triage cascade resume`.
    CascadeResumed(Box<quality::live::Resumed>),
    TaxonomyAdded(crate::pipeline::taxonomy::Added),
    Taxonomies(Vec<crate::pipeline::taxonomy::Listed>),
    Taxonomy(Box<taxonomy::Shown>),
}

/// The sweeper's tick (Lambda, `triage sweeper`, `triage dev`): the pipeline's sweep, then the
/// eval runs whose answers are all in, concluded (the pipeline knows nothing of evals). A
/// failed conclusion is the next tick's to retry; the sweep's report stands.
pub async fn sweep(sweeper: &Sweeper, deadline: Instant) -> Result<SweepReport> {
    let report = sweeper.tick(deadline).await?;
    if let Err(error) = quality::tend(sweeper.pool()).await {
        tracing::warn!(error = %error.report(), "eval runs not concluded: next tick");
    }
    // The cascade's audit judged: a cascade below its target suspends itself.
    if let Err(error) = quality::live::check(sweeper.pool(), sweeper.config()).await {
        tracing::warn!(error = %error.report(), "live precision not checked: next tick");
    }
    Ok(report)
}

/// Runs `request` for `operator` and records the run in the audit trail, however it ends.
pub async fn run(
    pool: &Pool,
    config: &Config,
    request: Request,
    operator: &Operator,
) -> Result<Outcome> {
    run_with(pool, config, request, operator, &quality::Watch::default()).await
}

/// [`run`], with how a caller follows a long operation (`triage eval` waits for its answers
/// with a progress bar and stops on Ctrl-C).
pub async fn run_with(
    pool: &Pool,
    config: &Config,
    request: Request,
    operator: &Operator,
    watch: &quality::Watch,
) -> Result<Outcome> {
    // Every operation leaves a trace on the dashboard, whoever ran it and however it ended.
    metric::operation(request.name());
    let op = request.name();
    let parameters = serde_json::to_value(&request).unwrap_or_default();
    let started = audit::start(pool, operator, op, &parameters).await?;
    let outcome = execute(pool, config, request, operator, watch).await;
    let reported = match &outcome {
        // The trail would only copy itself.
        Ok(Outcome::Audit(_)) => Ok(None),
        Ok(report) => Ok(serde_json::to_value(report).ok()),
        Err(e) => Err(e),
    };
    audit::finish(pool, started, reported).await?;
    outcome
}

async fn execute(
    pool: &Pool,
    config: &Config,
    request: Request,
    operator: &Operator,
    watch: &quality::Watch,
) -> Result<Outcome> {
    let pair = |prompt_version, model_version: Option<ModelVersion>| VersionPair {
        prompt_version,
        model_version: model_version.unwrap_or_else(|| config.versions.model.clone()),
    };
    let spread = |spread: Option<HumanDuration>| spread.map_or(DEFAULT_SPREAD, |s| s.0);
    no_local_files(&request, operator)?;
    // Work an operator queues may wait behind new tickets unless they say otherwise.
    let lane = |lane: Option<Lane>| lane.unwrap_or(Lane::Bulk);
    Ok(match request {
        Request::Reprocess {
            since,
            prompt_version,
            model_version,
            spread: pacing,
            lane: chosen,
            policy_version,
            dry_run,
            confirm,
        } => {
            let policy = chosen_policy(pool, config, policy_version.as_ref()).await?;
            known_to_this_build(&prompt_version, &policy)?;
            let versions = pair(prompt_version, model_version);
            usable(pool, config, &versions.model_version, &policy).await?;
            let plan = reprocess::Plan {
                since: since.resolve(Utc::now()),
                versions,
                policy: policy.version.parse()?,
                spread: spread(pacing),
                lane: lane(chosen),
                batch_size: BATCH_SIZE,
                dry_run,
            };
            if !dry_run && !confirm {
                let preview = reprocess::Plan {
                    dry_run: true,
                    ..plan.clone()
                };
                confirmed(reprocess::reprocess(pool, &preview).await?.inserted)?;
            }
            Outcome::Reprocess(reprocess::reprocess(pool, &plan).await?)
        }
        Request::ShadowDiff {
            from,
            to,
            policy_version,
        } => {
            let configured = &config.versions.model;
            let (from, to) = (from.resolve(configured), to.resolve(configured));
            let policy = chosen_policy(pool, config, policy_version.as_ref()).await?;
            let diff = shadow::shadow_diff(pool, &from, &to, &policy.version).await?;
            Outcome::ShadowDiff(Box::new(diff))
        }
        Request::Promote {
            prompt_version,
            model_version,
            policy_version,
            force,
            reason,
            write_back,
        } => {
            let version = pair(prompt_version, model_version);
            let policy = chosen_policy(pool, config, policy_version.as_ref()).await?;
            usable(pool, config, &version.model_version, &policy).await?;
            let mut gate = None;
            if !force {
                // An eval whose answers came in since the last tick counts already.
                quality::tend(pool).await?;
                gate = promote::quality_gate(pool, config, &version, &policy).await?;
            } else if reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                return Err(InvalidRequest::new(
                    "reason",
                    "--force needs --reason TEXT: why the quality gate is overridden".into(),
                )
                .into());
            }
            Outcome::Promote(promote::Promotion {
                gate,
                ..promote::promote(pool, &version, write_back).await?
            })
        }
        request @ Request::Eval { .. } => eval::run(pool, config, request, operator, watch).await?,
        Request::Redrive {
            reason,
            since,
            limit,
            spread: pacing,
            lane: chosen,
            dry_run,
            confirm,
        } => {
            if let Some(limit) = limit {
                within("limit", limit, MAX_REDRIVE_LIMIT)?;
            }
            let selection = redrive::Selection {
                reason,
                since: since.map(|s| s.0),
                limit,
                spread: spread(pacing),
                lane: lane(chosen),
                batch_size: BATCH_SIZE,
                dry_run,
            };
            for model in redrive::models(pool, &selection).await? {
                priced(config, &model.parse()?)?;
            }
            if !dry_run && !confirm {
                let preview = redrive::Selection {
                    dry_run: true,
                    ..selection.clone()
                };
                confirmed(redrive::redrive(pool, &preview).await?.moved)?;
            }
            Outcome::Redrive(redrive::redrive(pool, &selection).await?)
        }
        Request::Stats => {
            let serves = Serves::for_model_version(&config.versions.model);
            let budget = config.worker.daily_budget_usd;
            Outcome::Stats(report::health(pool, serves, budget).await?)
        }
        Request::DeadLetters { since } => {
            let since = since.map_or(DEFAULT_DEAD_LETTER_WINDOW, |s| s.0);
            Outcome::DeadLetters(report::dead_letters(pool, since).await?)
        }
        Request::Erase { ticket_ids } => {
            within(
                "ticket_ids",
                ticket_ids.len() as i64,
                MAX_ERASE_TICKETS as i64,
            )?;
            Outcome::Erase(erase::erase(pool, &ticket_ids).await?)
        }
        Request::Deliveries => Outcome::Deliveries(delivery::status::deliveries(pool).await?),
        Request::ReplayDeliveries {
            subscription,
            since,
        } => Outcome::ReplayDeliveries {
            queued: delivery::status::replay(pool, subscription, since.resolve(Utc::now())).await?,
        },
        Request::Pause { lane, reason } => {
            let client = crate::db::client(pool).await?;
            let lanes = lane.map_or(Pausable::ALL.to_vec(), |lane| vec![lane]);
            let reason = reason.as_deref().filter(|r| !r.trim().is_empty());
            pause::pause(&client, &lanes, operator.as_str(), reason).await?;
            Outcome::Paused {
                paused: pause::entries(&client).await?,
            }
        }
        Request::Resume { lane } => {
            let client = crate::db::client(pool).await?;
            let lanes = lane.map_or(Pausable::ALL.to_vec(), |lane| vec![lane]);
            pause::resume(&client, &lanes).await?;
            Outcome::Paused {
                paused: pause::entries(&client).await?,
            }
        }
        Request::Feedback { items } => {
            let policy = chosen_policy(pool, config, None).await?;
            feedback::give_batch(pool, config, &policy, items.0, operator).await?
        }
        Request::Train {
            sources,
            policy_version,
            columns,
            precision,
        } => {
            within("from", sources.len() as i64, fits::MAX_TRAIN_SOURCES)?;
            let policy = chosen_policy(pool, config, policy_version.as_ref()).await?;
            let columns = columns.as_ref();
            let shares = (&config.labelling).into();
            let trained = train::train(
                pool, &policy, &sources, columns, operator, shares, precision,
            )
            .await?;
            Outcome::Trained(trained)
        }
        Request::Retrain { days, holdout_days } => {
            let policy = chosen_policy(pool, config, None).await?;
            let days = days.unwrap_or(retrain::DEFAULT_DAYS);
            let holdout = holdout_days.unwrap_or(retrain::DEFAULT_HOLDOUT_DAYS);
            let run = retrain::retrain(pool, config, &policy, (days, holdout), operator).await?;
            Outcome::Retrained(run)
        }
        Request::Models { action: None } => Outcome::Models(train::list(pool).await?),
        Request::Models {
            action: Some(ModelsAction::Retire { version }),
        } => Outcome::Retired(models::retire(pool, &config.versions.model, &version).await?),
        Request::Models {
            action: Some(ModelsAction::Switch { version, reason }),
        } => {
            let by = operator.as_str();
            let configured = &config.versions.model;
            Outcome::Switched(models::switch_to(pool, configured, &version, by, &reason).await?)
        }
        Request::Taxonomy { action } => taxonomy::run(pool, action).await?,
        Request::Cascade { action } => cascade::run(pool, config, action, operator).await?,
        Request::Audit { limit } => {
            let limit = limit.unwrap_or(DEFAULT_AUDIT_ROWS);
            within("limit", limit, MAX_AUDIT_ROWS)?;
            Outcome::Audit(audit::list(pool, limit).await?)
        }
    })
}
