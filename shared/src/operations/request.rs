//! What an operator can ask for, declared once: the same type is the CLI's subcommands
//! (clap) and the ops Lambda's JSON payload (`{"op": "reprocess", ...}`, serde), so flags,
//! fields and their help cannot drift apart. Defaults live in [`super::run`], once.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_with::{serde_as, DisplayFromStr};

use super::{
    cascade::CascadeAction,
    feedback::{FeedbackItem, FeedbackItems},
    models::ModelsAction,
    times::{HumanDuration, Since},
    train::TrainSource,
};
use crate::{
    domain::{
        ticket::TicketId,
        versions::{ModelVersion, PolicyVersion, PromptVersion, VersionSpec},
    },
    pipeline::{outbox::Lane, pause::Pausable},
    quality::{
        set::{Columns, Split},
        source::SetSource,
    },
};

#[serde_as]
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, clap::Subcommand)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Queue tickets again under a new prompt/model version (new keys; old results stay).
    Reprocess {
        /// Tickets created since: an RFC 3339 time or a duration back from now (2h, 30d).
        #[arg(long)]
        #[serde_as(as = "DisplayFromStr")]
        since: Since,
        #[arg(long)]
        prompt_version: PromptVersion,
        /// model@effort; default: the configured model version.
        #[arg(long)]
        #[serde(default)]
        model_version: Option<ModelVersion>,
        /// Jobs become claimable at random within this window (default 30m), so the
        /// provider is not hit at once.
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        spread: Option<HumanDuration>,
        /// The new jobs' lane: bulk (default: behind new tickets, the cheaper tiers) or
        /// interactive (ahead of bulk work, online).
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        lane: Option<Lane>,
        /// The policy: the built-in policy-v1 or a stored taxonomy's version (`triage taxonomy
        /// list`); default: TRIAGE_POLICY_VERSION.
        #[arg(long)]
        #[serde(default)]
        policy_version: Option<PolicyVersion>,
        /// Count what would change; write nothing.
        #[arg(long)]
        #[serde(default)]
        dry_run: bool,
        /// Needed when more than `CONFIRM_ABOVE_JOBS` (1000) jobs would be queued: each
        /// one is a billed call.
        #[arg(long)]
        #[serde(default)]
        confirm: bool,
    },
    /// Compare two versions on the tickets evaluated under both.
    ShadowDiff {
        /// prompt or prompt/model, e.g. triage-v3/gpt-6-luna@medium.
        #[arg(long)]
        #[serde_as(as = "DisplayFromStr")]
        from: VersionSpec,
        #[arg(long)]
        #[serde_as(as = "DisplayFromStr")]
        to: VersionSpec,
        /// Answers made under this policy: the built-in policy-v1 or a stored taxonomy's
        /// version; default: TRIAGE_POLICY_VERSION.
        #[arg(long)]
        #[serde(default)]
        policy_version: Option<PolicyVersion>,
    },
    /// Make GET /tickets/{id} show this version (recorded in the database). Needs an eval run
    /// of it on the test split of TRIAGE_EVAL_SET no worse than the current version's.
    Promote {
        #[arg(long)]
        prompt_version: PromptVersion,
        /// model@effort; default: the configured model version.
        #[arg(long)]
        #[serde(default)]
        model_version: Option<ModelVersion>,
        /// The gate judges the runs made under this policy: the built-in policy-v1 or a stored
        /// taxonomy's version; default: TRIAGE_POLICY_VERSION.
        #[arg(long)]
        #[serde(default)]
        policy_version: Option<PolicyVersion>,
        /// Promote although the quality gate refuses; needs --reason (both go to the audit trail).
        #[arg(long, requires = "reason")]
        #[serde(default)]
        force: bool,
        /// Why the gate is overridden.
        #[arg(long)]
        #[serde(default)]
        reason: Option<String>,
        /// Also write the version's results back to the desk's Zendesk tickets that are not
        /// solved or closed (docs/zendesk.md); without it Zendesk is sent nothing.
        #[arg(long)]
        #[serde(default)]
        write_back: bool,
    },
    /// Evaluate versions over a labelled set through the pipeline (docs/quality.md); --list
    /// shows the stored runs.
    Eval {
        /// The labelled set (JSONL, or CSV: see --columns): `shipped` (built into the binary,
        /// evals/tickets.jsonl), `s3://BUCKET/KEY`, a file's path, or `feedback`: the
        /// production tickets the help desk labelled (see --days).
        #[arg(long, required_unless_present_any = ["list", "by_time"])]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        set: Option<SetSource>,
        /// The set is CSV, read by these columns: ROLE=HEADER pairs, e.g.
        /// `text=body,subject=title,label=queue,urgent=priority_high,family=thread_id` (or
        /// `time=created_at` instead of family; also `id=`, `split=`). text and label are
        /// needed; a role not named is read from the column of its JSONL name if there is one.
        /// A set named `*.csv` is CSV without it. Without a split column the rows are split so
        /// that near duplicates share one (docs/quality.md, "Your desk's own set").
        #[arg(long, conflicts_with = "list")]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        columns: Option<Columns>,
        /// With `--set feedback`: how many days of the desk's labels (default 30). With
        /// `--by-time`: how many days after the split are judged (default 7).
        #[arg(long)]
        #[serde(default)]
        days: Option<u32>,
        /// Judge the deployment's own traffic split by time (docs/quality.md): a classifier
        /// trained on the 30 days of results and feedback before the split answers the tickets
        /// after it, beside the large model's stored answers. No provider call.
        #[arg(long, conflicts_with_all = ["list", "thresholds", "set", "split"])]
        #[serde(default)]
        by_time: bool,
        /// With `--by-time`: where to split, an RFC 3339 time or a duration back from now
        /// (default: --days back).
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        at: Option<Since>,
        /// With `--by-time`: the precision local answers must keep (e.g. 0.97): thresholds
        /// derived by cross-fitting on the training window, per department.
        #[arg(long, conflicts_with = "threshold")]
        #[serde(default)]
        precision: Option<f64>,
        /// With `--by-time`: one confidence threshold instead (default: the cascade's).
        #[arg(long)]
        #[serde(default)]
        threshold: Option<f64>,
        /// Only this split: dev (for tuning prompts) or test (only reported).
        #[arg(long)]
        #[serde(default)]
        split: Option<Split>,
        /// prompt or prompt/model@effort, e.g. triage-v6/gpt-6-luna@medium; repeat to compare
        /// (the first is the baseline); default: the configured version.
        #[arg(long = "version")]
        #[serde(default)]
        #[serde_as(as = "Vec<DisplayFromStr>")]
        versions: Vec<VersionSpec>,
        /// The policy: the built-in policy-v1 or a stored taxonomy's version (`triage taxonomy
        /// list`); default: TRIAGE_POLICY_VERSION.
        #[arg(long, conflicts_with = "list")]
        #[serde(default)]
        policy_version: Option<PolicyVersion>,
        /// List the stored runs instead.
        #[arg(long)]
        #[serde(default)]
        list: bool,
        /// Sweep the threshold of one cascade (--version PROMPT/cascade(...)) on the dev split:
        /// accuracy, the share answered locally and the cost at each threshold.
        #[arg(long, conflicts_with = "list")]
        #[serde(default)]
        thresholds: bool,
        /// The jobs' lane: bulk (default: behind new tickets, `TRIAGE_BULK_TIER`, so up to 24 h
        /// with `batch`) or interactive (online, ahead of bulk work).
        #[arg(long, conflicts_with = "list")]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        lane: Option<Lane>,
        /// Needed when more than `CONFIRM_ABOVE_JOBS` (1000) billed jobs would be queued (the
        /// refusal says how many): each one is a provider call.
        #[arg(long, conflicts_with = "list")]
        #[serde(default)]
        confirm: bool,
    },
    /// Move dead letters back to the queue with attempts reset.
    Redrive {
        /// Only this reason, as `triage dead-letters` groups them.
        #[arg(long)]
        #[serde(default)]
        reason: Option<String>,
        /// Only jobs that died within this long, e.g. 2h.
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        since: Option<HumanDuration>,
        /// At most this many jobs.
        #[arg(long)]
        #[serde(default)]
        limit: Option<i64>,
        /// Jobs become claimable at random within this window (default 30m).
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        spread: Option<HumanDuration>,
        /// The jobs' lane: bulk (default: behind new tickets, the cheaper tiers) or
        /// interactive (ahead of bulk work, online).
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        lane: Option<Lane>,
        /// Count what would move; write nothing.
        #[arg(long)]
        #[serde(default)]
        dry_run: bool,
        /// Needed when more than `CONFIRM_ABOVE_JOBS` (1000) jobs would move.
        #[arg(long)]
        #[serde(default)]
        confirm: bool,
    },
    /// Queue health: depth, oldest claimable age, dedup, billed calls and spend.
    Stats,
    /// Dead letters grouped by reason.
    DeadLetters {
        /// How far back, e.g. 90s, 30m, 2h, 1d (default 1d).
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        since: Option<HumanDuration>,
    },
    /// Erase tickets, their links and request keys, and what only they referred to.
    Erase {
        /// Ticket ids, as POST /tickets returned them.
        #[arg(required = true, num_args = 1..)]
        ticket_ids: Vec<TicketId>,
    },
    /// Deliveries pending, failing and disabled, by endpoint (docs/delivery.md).
    Deliveries,
    /// Deliver an endpoint's events again (same event ids) since a time; re-enables it.
    ReplayDeliveries {
        /// The subscription id, as `triage deliveries` lists it.
        #[arg(long)]
        subscription: uuid::Uuid,
        /// Events announced since: an RFC 3339 time or a duration back from now (2h, 3d).
        #[arg(long)]
        #[serde_as(as = "DisplayFromStr")]
        since: Since,
    },
    /// Stop the worker claiming from a lane, or the deliverer delivering, from their next
    /// invocation (no deploy); jobs wait with no attempt spent. No lane: all three.
    Pause {
        /// interactive, bulk or deliveries.
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        lane: Option<Pausable>,
        /// Why (shown on the console and in `triage stats`).
        #[arg(long)]
        #[serde(default)]
        reason: Option<String>,
    },
    /// Undo `pause` for a lane, or for all three.
    Resume {
        /// interactive, bulk or deliveries.
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        lane: Option<Pausable>,
    },
    /// The help desk's labels for tickets, in a batch (an integration's, or a backfill); each
    /// as `POST /tickets/{id}/feedback` takes it, for any production ticket.
    Feedback {
        /// JSON: `[{"ticket_id": UUID, "department": ..., "is_urgent": bool}, ...]`.
        #[arg(long)]
        #[serde_as(as = "serde_with::FromInto<Vec<FeedbackItem>>")]
        items: FeedbackItems,
    },
    /// Build a local classifier for a cascade (docs/cascade.md) and store it; prints its
    /// version, `local-<hex>`.
    Train {
        /// What it learns from, any mix: set:PATH[:dev] (the dev split only; also
        /// set:shipped, set:s3://BUCKET/KEY), results:DAYS (the model's own answers),
        /// feedback:DAYS (the desk's corrections).
        #[arg(long = "from", required = true, num_args = 1..)]
        #[serde(rename = "from")]
        #[serde_as(as = "Vec<DisplayFromStr>")]
        sources: Vec<TrainSource>,
        /// The policy: the built-in policy-v1 or a stored taxonomy's version (`triage taxonomy
        /// list`); default: TRIAGE_POLICY_VERSION.
        #[arg(long)]
        #[serde(default)]
        policy_version: Option<PolicyVersion>,
        /// The sets named are CSV, read by these columns (as `eval --columns`); only their
        /// dev rows train.
        #[arg(long)]
        #[serde(default)]
        #[serde_as(as = "Option<DisplayFromStr>")]
        columns: Option<Columns>,
        /// Also derive the thresholds that keep this precision (e.g. 0.97), per department,
        /// cross-fitted on the same examples; a cascade names them `p0.97`.
        #[arg(long)]
        #[serde(default)]
        precision: Option<f64>,
    },
    /// Keep the configured cascade fresh: train a candidate on the DAYS days before the last
    /// HOLDOUT_DAYS, judge it beside the live classifier on those, and switch to it only when it
    /// keeps the cascade's target precision and its local share (docs/cascade.md "Kept fresh").
    Retrain {
        /// Days of results and feedback the candidate learns from (default 30).
        #[arg(long)]
        #[serde(default)]
        days: Option<u32>,
        /// The most recent days, which it is judged on and does not learn from (default 3).
        #[arg(long)]
        #[serde(default)]
        holdout_days: Option<u32>,
    },
    /// The local classifiers stored, newest first, each with its training window; `retire`
    /// removes one.
    Models {
        #[command(subcommand)]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<ModelsAction>,
    },
    /// The configured cascade's audited live precision, and the end of its suspension
    /// (docs/cascade.md, "The audit").
    Cascade {
        #[command(subcommand)]
        action: CascadeAction,
    },
    /// The desk's taxonomies (docs/taxonomy.md): store one, list them, show one.
    Taxonomy {
        #[command(subcommand)]
        action: TaxonomyAction,
    },
    /// The operator commands run, newest first: who, what, with which parameters.
    Audit {
        /// At most this many (default 50).
        #[arg(long)]
        #[serde(default)]
        limit: Option<i64>,
    },
}

impl Request {
    /// The `op` of the payload, for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Reprocess { .. } => "reprocess",
            Request::ShadowDiff { .. } => "shadow_diff",
            Request::Promote { .. } => "promote",
            Request::Eval { .. } => "eval",
            Request::Redrive { .. } => "redrive",
            Request::Stats => "stats",
            Request::DeadLetters { .. } => "dead_letters",
            Request::Erase { .. } => "erase",
            Request::Deliveries => "deliveries",
            Request::ReplayDeliveries { .. } => "replay_deliveries",
            Request::Pause { .. } => "pause",
            Request::Resume { .. } => "resume",
            Request::Feedback { .. } => "feedback",
            Request::Train { .. } => "train",
            Request::Retrain { .. } => "retrain",
            Request::Models { .. } => "models",
            Request::Taxonomy { .. } => "taxonomy",
            Request::Cascade { .. } => "cascade",
            Request::Audit { .. } => "audit",
        }
    }
}

/// What `triage taxonomy` does. In the ops payload: `{"op": "taxonomy", "action": "list"}`,
/// `"action": {"show": {"version": V}}`, `"action": {"add": {"file": {...the taxonomy...}}}`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, clap::Subcommand)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TaxonomyAction {
    /// Store a taxonomy file (its format: docs/taxonomy.md) under its content's version,
    /// `<name>-<12 hex>`; a bad file is refused naming the field, and nothing is stored.
    Add {
        /// The file (the ops Lambda takes the taxonomy itself, as JSON, instead of a path).
        #[arg(value_name = "FILE")]
        file: TaxonomyFile,
    },
    /// The stored taxonomies, newest first.
    List,
    /// One stored taxonomy: its departments, their definitions and groups, the urgency rule.
    Show {
        /// As `triage taxonomy list` shows it, e.g. bank-3f9a0c1d2e4b.
        version: String,
    },
}

/// A taxonomy to add: a local file's path (the CLI), or the taxonomy itself (the ops payload).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum TaxonomyFile {
    Path(std::path::PathBuf),
    Inline(serde_json::Value),
}

impl FromStr for TaxonomyFile {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(TaxonomyFile::Path(s.into()))
    }
}
