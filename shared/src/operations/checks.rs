//! What a request must pass before it changes anything: bounded counts, confirmed large runs,
//! versions this build and this deployment can evaluate.

use deadpool_postgres::Pool;

use super::{
    audit::Operator,
    train::{self, TrainSource},
    Request, TaxonomyAction, TaxonomyFile, CONFIRM_ABOVE_JOBS,
};
use crate::{
    config::Config,
    domain::{
        error::{InvalidRequest, Result},
        versions::{ModelVersion, PolicyVersion, PromptVersion},
    },
    pipeline::{limits::budget, taxonomy},
    providers::{Policy, Prompt},
    quality::source::SetSource,
};

/// Refuses a count outside 1..=`max`: every list and limit of a request is bounded.
pub(super) fn within(field: &str, value: i64, max: i64) -> Result<(), InvalidRequest> {
    if (1..=max).contains(&value) {
        return Ok(());
    }
    Err(InvalidRequest::new(
        field,
        format!("{value} is outside 1..={max}"),
    ))
}

/// Refuses a run over [`CONFIRM_ABOVE_JOBS`] that was not confirmed.
pub(super) fn confirmed(jobs: i64) -> Result<(), InvalidRequest> {
    if jobs <= CONFIRM_ABOVE_JOBS {
        return Ok(());
    }
    Err(InvalidRequest::new(
        "confirm",
        format!(
            "this would queue {jobs} jobs (over {CONFIRM_ABOVE_JOBS}), each a billed call: \
             check with --dry-run, then run again with --confirm (\"confirm\": true)"
        ),
    ))
}

/// Refuses an eval that would queue over [`CONFIRM_ABOVE_JOBS`] billed jobs unconfirmed,
/// saying how many: an eval has no dry run, the refusal is its preview.
pub(super) fn confirmed_eval(jobs: i64) -> Result<(), InvalidRequest> {
    if jobs <= CONFIRM_ABOVE_JOBS {
        return Ok(());
    }
    Err(InvalidRequest::new(
        "confirm",
        format!(
            "this eval would queue {jobs} billed jobs (over {CONFIRM_ABOVE_JOBS}), each a \
             provider call: run again with --confirm (\"confirm\": true), or evaluate fewer \
             versions or one split"
        ),
    ))
}

/// The policy a request works under: its `--policy-version`, else `TRIAGE_POLICY_VERSION`; a
/// built-in one, or a stored taxonomy read from the database. One that is not stored is refused
/// naming it, never replaced by another.
pub(super) async fn chosen_policy(
    pool: &Pool,
    config: &Config,
    chosen: Option<&PolicyVersion>,
) -> Result<Policy> {
    let version = chosen.unwrap_or(&config.versions.policy);
    let client = crate::db::client(pool).await?;
    Ok(taxonomy::policy(&client, version.as_str())
        .await?
        .map_err(|unusable| InvalidRequest::new("policy_version", unusable.to_string()))?)
}

/// Work the pipeline could not do is refused: a model the daily budget could not count, a
/// cascade whose classifier is not stored or was trained for another taxonomy than `policy`.
pub(super) async fn usable(
    pool: &Pool,
    config: &Config,
    model: &ModelVersion,
    policy: &Policy,
) -> Result<()> {
    priced(config, model)?;
    train::stored_if_cascade(pool, model, policy).await
}

/// Work for a model the daily budget could not count is refused (`budget::unpriced`).
pub(super) fn priced(config: &Config, model: &ModelVersion) -> Result<(), InvalidRequest> {
    let (budget, prices) = (config.worker.daily_budget_usd, &config.provider.prices);
    match budget::unpriced(budget, prices, model) {
        Some(reason) => Err(InvalidRequest::new("model_version", reason)),
        None => Ok(()),
    }
}

/// A reprocess (or eval) under a prompt this build cannot send under `policy` would only fill
/// the dead letters (under a stored taxonomy, only the versions framing the ticket as data).
pub(super) fn known_to_this_build(
    prompt_version: &PromptVersion,
    policy: &Policy,
) -> Result<(), InvalidRequest> {
    if Prompt::load(prompt_version.as_str(), policy).is_some() {
        return Ok(());
    }
    let known: Vec<&str> = Prompt::known_versions()
        .filter(|v| Prompt::load(v, policy).is_some())
        .collect();
    Err(InvalidRequest::new(
        "prompt_version",
        format!(
            "{:?} is not in this build under {} (known: {})",
            prompt_version.as_str(),
            policy.version,
            known.join(", ")
        ),
    ))
}

/// Refuses, in the ops Lambda, a set named by a local path: the function's files are its own
/// (a path would only tell the caller which of them exist, and how big they are), so only the
/// shipped set, S3 and the desk's feedback are sets there. Nothing is read before this check.
pub(super) fn no_local_files(request: &Request, operator: &Operator) -> Result<(), InvalidRequest> {
    if operator.lambda_host().is_none() {
        return Ok(());
    }
    let refused = |field: &str, instead: &str| {
        Err(InvalidRequest::new(
            field,
            format!("the ops Lambda reads no local files: {instead}"),
        ))
    };
    let sets = "give shipped, s3://BUCKET/KEY or feedback (set:shipped, set:s3://BUCKET/KEY, \
                results:DAYS or feedback:DAYS to train)";
    match request {
        Request::Eval {
            set: Some(SetSource::Path(_)),
            ..
        } => refused("set", sets),
        Request::Train { sources, .. }
            if sources
                .iter()
                .any(|s| matches!(s, TrainSource::Set(SetSource::Path(_)))) =>
        {
            refused("from", sets)
        }
        Request::Taxonomy {
            action: TaxonomyAction::Add {
                file: TaxonomyFile::Path(_),
            },
        } => refused(
            "file",
            "give the taxonomy itself: \"file\": {\"name\": ...}",
        ),
        _ => Ok(()),
    }
}
