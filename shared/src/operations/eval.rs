//! `triage eval` (docs/quality.md): the stored runs (`--list`), a run over a labelled set, a
//! cascade's threshold sweep (`--thresholds`) and the time split over the deployment's own
//! traffic (`--by-time`).

use chrono::Utc;
use deadpool_postgres::Pool;

use super::{
    checks::{chosen_policy, confirmed_eval, known_to_this_build, usable, within},
    fits, train, Operator, Outcome, Request, LISTED_EVAL_RUNS,
};
use crate::{
    config::Config,
    domain::{
        error::{InvalidRequest, Result},
        versions::{Threshold, VersionPair},
    },
    pipeline::outbox::Lane,
    quality::{self, by_time},
};

/// Days after the split a time split judges by default.
const BY_TIME_DAYS: u32 = 7;

pub(super) async fn run(
    pool: &Pool,
    config: &Config,
    request: Request,
    operator: &Operator,
    watch: &quality::Watch,
) -> Result<Outcome> {
    let Request::Eval {
        set,
        columns,
        days,
        split,
        versions,
        list,
        thresholds,
        lane: chosen,
        policy_version,
        confirm,
        by_time,
        at,
        precision,
        threshold,
    } = request
    else {
        unreachable!("operations::execute hands over evals only");
    };
    if list {
        // Runs whose answers are all in are concluded first, so the list is current.
        let running = quality::tend(pool).await?;
        let client = crate::db::client(pool).await?;
        let runs = quality::runs::list(&client, LISTED_EVAL_RUNS).await?;
        return Ok(Outcome::EvalRuns(quality::Listing { running, runs }));
    }
    let policy = chosen_policy(pool, config, policy_version.as_ref()).await?;
    let configured = &config.versions.model;
    let versions: Vec<VersionPair> = if versions.is_empty() {
        vec![config.versions.pair()]
    } else {
        versions
            .into_iter()
            .map(|v| v.resolve(configured))
            .collect()
    };
    if by_time {
        if set.is_some() || split.is_some() || thresholds {
            let alone = "--by-time judges production traffic: no --set, --split or --thresholds";
            return Err(InvalidRequest::new("by_time", alone.into()).into());
        }
        let [version] = &versions[..] else {
            let one = "--by-time judges one version: the large model's stored answers, or a \
                       cascade's (its large model's answers, its threshold)";
            return Err(InvalidRequest::new("versions", one.into()).into());
        };
        let days = days.unwrap_or(BY_TIME_DAYS);
        within("days", days.into(), 366)?;
        let cascade = version.model_version.cascade();
        let rule = match (precision, threshold, cascade.as_ref().map(|c| c.threshold)) {
            (Some(p), _, _) | (None, None, Some(Threshold::Target(p))) => {
                train::target_precision(p)?;
                by_time::Rule::Precision(p)
            }
            (None, Some(t), _) | (None, None, Some(Threshold::Confidence(t))) => {
                if !(0.0..=1.0).contains(&t) {
                    let why = format!("{t} is not a threshold in [0, 1]");
                    return Err(InvalidRequest::new("threshold", why).into());
                }
                by_time::Rule::Threshold(t)
            }
            (None, None, None) => by_time::Rule::Threshold(by_time::DEFAULT_THRESHOLD),
        };
        let now = Utc::now();
        let span = chrono::Duration::days(days.into());
        let at = at.map_or(now - span, |at| at.resolve(now));
        let plan = by_time::Plan {
            at,
            until: (at + span).min(now),
            train_days: by_time::TRAIN_DAYS,
            version: VersionPair {
                prompt_version: version.prompt_version.clone(),
                model_version: cascade.map_or(version.model_version.clone(), |c| c.large),
            },
            rule,
            policy,
            shares: (&config.labelling).into(),
            budget: fits::training_budget(operator).map(|budget| budget.bytes),
        };
        let report = by_time::run(pool, &plan, operator.as_str()).await?;
        return Ok(Outcome::ByTime(Box::new(report)));
    }
    let source = match (set, days) {
        (None, _) => {
            let needed = "--set shipped|s3://BUCKET/KEY|PATH|feedback (or --by-time) is needed";
            return Err(InvalidRequest::new("set", needed.into()).into());
        }
        (Some(quality::source::SetSource::Feedback { .. }), Some(days)) => {
            within("days", days.into(), 366)?;
            quality::source::SetSource::Feedback { days }
        }
        (Some(_), Some(_)) => {
            let only = "--days goes with --set feedback or --by-time only".into();
            return Err(InvalidRequest::new("days", only).into());
        }
        (Some(source), None) => source,
    };
    if precision.is_some() || threshold.is_some() || at.is_some() {
        let only = "--at, --precision and --threshold go with --by-time".into();
        return Err(InvalidRequest::new("by_time", only).into());
    }
    within("versions", versions.len() as i64, fits::MAX_EVAL_VERSIONS)?;
    if thresholds {
        quality::thresholds::check(split, &versions)?;
    }
    for version in &versions {
        known_to_this_build(&version.prompt_version, &policy)?;
        usable(pool, config, &version.model_version, &policy).await?;
    }
    let set = quality::set::LabelledSet::load(&source, columns.as_ref(), &policy, pool).await?;
    let plan = quality::Plan {
        source,
        set,
        split,
        versions,
        policy,
        // Work an operator queues may wait behind new tickets unless they say otherwise.
        lane: chosen.unwrap_or(Lane::Bulk),
    };
    let (rows, text_bytes) = quality::preview::held(&plan);
    let work = fits::Work { rows, text_bytes };
    fits::fits(operator, "set", fits::EVAL, work, "evaluate a smaller set")?;
    if !confirm {
        confirmed_eval(quality::preview::billed_jobs(pool, &plan).await?)?;
    }
    Ok(if thresholds {
        let sweep = quality::thresholds::sweep(pool, &plan, operator.as_str(), watch).await?;
        Outcome::Sweep(Box::new(sweep))
    } else {
        Outcome::Eval(Box::new(
            quality::run(pool, &plan, operator.as_str(), watch).await?,
        ))
    })
}
