//! `triage train --from SOURCE...` and `triage models` (docs/cascade.md): a local classifier
//! built from any mix of a labelled set's dev split (never a test family: those judge it), the
//! large model's own answers of the last days (distillation) and the desk's corrections,
//! stored by content for every function to load by version.

use std::{fmt, str::FromStr, time::Instant};

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;

use super::super::{
    audit::Operator,
    fits::{self, Budget},
};
use crate::quality::{
    set::{Columns, LabelledSet, Split},
    source::SetSource,
};
use crate::{
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::ModelVersion,
    },
    pipeline::cascade::{
        examples::{self, Read},
        gather::{Gathered, LeftOut, Standing, Taken},
        models::{self, StoredModel},
        targets, trained_on,
    },
    providers::{
        classifier::{
            target::{self, Thresholds},
            Example, LocalModel, TrainError,
        },
        Policy,
    },
};

/// A target precision an operator may ask for: in (0, 1].
pub fn target_precision(p: f64) -> Result<(), InvalidRequest> {
    if p > 0.0 && p <= 1.0 {
        return Ok(());
    }
    let why = format!("{p} is not a precision in (0, 1] (e.g. 0.97)");
    Err(InvalidRequest::new("precision", why))
}

/// What a classifier learns from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrainSource {
    /// `set:PATH[:dev]` (or `set:shipped`, `set:s3://…`): the set's dev rows only.
    Set(SetSource),
    /// `results:DAYS`: production results a model answered in the last DAYS days.
    Results { days: u32 },
    /// `feedback:DAYS`: the desk's current labels given in the last DAYS days.
    Feedback { days: u32 },
}

/// Days back a source may look (as `--set feedback`).
const MAX_DAYS: u32 = 366;

impl FromStr for TrainSource {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |why: &str| InvalidRequest::new("from", format!("{s:?}: {why}"));
        let days = |text: &str| {
            text.parse::<u32>()
                .ok()
                .filter(|d| (1..=MAX_DAYS).contains(d))
                .ok_or_else(|| invalid("DAYS is a whole number of days, 1 to 366"))
        };
        if let Some(days_text) = s.strip_prefix("results:") {
            return Ok(Self::Results {
                days: days(days_text)?,
            });
        }
        if let Some(days_text) = s.strip_prefix("feedback:") {
            return Ok(Self::Feedback {
                days: days(days_text)?,
            });
        }
        let Some(set) = s.strip_prefix("set:") else {
            return Err(invalid(
                "give set:PATH[:dev], results:DAYS or feedback:DAYS",
            ));
        };
        if set.ends_with(":test") {
            return Err(invalid(
                "the test split never trains: its families judge the classifier",
            ));
        }
        match set.strip_suffix(":dev").unwrap_or(set).parse()? {
            SetSource::Feedback { .. } => Err(invalid("the desk's labels are feedback:DAYS")),
            source => Ok(Self::Set(source)),
        }
    }
}

impl TrainSource {
    /// How many days of production data it reads (`None`: a labelled set, no ticket).
    fn days(&self) -> Option<u32> {
        match self {
            Self::Set(_) => None,
            Self::Results { days } | Self::Feedback { days } => Some(*days),
        }
    }
}

impl fmt::Display for TrainSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Set(source) => write!(f, "set:{source}:dev"),
            Self::Results { days } => write!(f, "results:{days}"),
            Self::Feedback { days } => write!(f, "feedback:{days}"),
        }
    }
}

/// One source's share of the examples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceCount {
    pub source: String,
    /// The columns a CSV set was read by (`--columns`), so the set can be told again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<String>,
    /// Rows read (before a text both the model and the desk labelled counts once).
    pub examples: usize,
    /// Rows that did not train, by why.
    pub left_out: LeftOut,
}

/// What `triage train` made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trained {
    /// `local-<hex>`: name it in a cascade, `cascade(VERSION,THRESHOLD,MODEL@EFFORT)`.
    pub version: String,
    /// False when the same classifier was stored already (the same examples).
    pub new: bool,
    /// Examples it learnt from, once each (a ticket the desk corrected counts once, with the
    /// desk's labels).
    pub examples: usize,
    pub sources: Vec<SourceCount>,
    /// `"learnt"`, or `"never urgent in its examples"` / `"always urgent in its examples"`:
    /// its `is_urgent` is then that side's constant (docs/cascade.md, "The classifier").
    pub urgency: &'static str,
    pub bytes: usize,
    pub seconds: f64,
    /// Each source's window, owner cap and examples per giver and owner
    /// (`local_model.provenance`, docs/labelling.md).
    pub provenance: Vec<SourceProvenance>,
    /// With `--precision P`: the thresholds keeping P, cross-fitted on these examples and
    /// stored with the classifier (a cascade names them `p<P>`).
    pub thresholds: Option<Thresholds>,
    /// What the examples could hold where it ran (`None`: the machine's memory is not known,
    /// and only each source's rows were bounded).
    pub budget: Option<Budget>,
    /// What they held of it (`gather::cost`).
    pub held_bytes: u64,
}

/// Where one source's examples came from, as read (before a ticket both the model and the desk
/// labelled is counted once).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceProvenance {
    pub source: String,
    /// The days of production data it read; `None` for a labelled set.
    pub days: Option<u32>,
    pub examples: usize,
    #[serde(flatten)]
    pub from: examples::Provenance,
}

/// Builds a classifier from `sources` and stores it. Its examples are gathered within the
/// budget of the memory where it runs (`fits::training_budget`): the labelled sets first (each
/// file is held whole as it is read, so best while nothing else is), then the desk's
/// corrections, then the model's answers, each database source streamed, each owner's newest
/// first; once the budget is spent nothing more is read, and each source reports the rows it
/// left out. Each database source gives each ticket owner at most `owner_share` of its
/// examples (`TRIAGE_TRAIN_OWNER_SHARE`, docs/labelling.md).
pub async fn train(
    pool: &Pool,
    policy: &Policy,
    sources: &[TrainSource],
    columns: Option<&Columns>,
    operator: &Operator,
    owner_share: f64,
    precision: Option<f64>,
) -> Result<Trained> {
    let started = Instant::now();
    if let Some(p) = precision {
        target_precision(p)?;
    }
    let trained_by = operator.as_str();
    // The window opens DAYS (the most any source reads) before the first read, by the
    // database's clock, which the sources' `now()` reads; it closes when the model is stored.
    let trained_from = match sources.iter().filter_map(TrainSource::days).max() {
        None => None,
        Some(days) => {
            let client = db::client(pool).await?;
            let row = client
                .query_one(
                    "SELECT now() - make_interval(days => $1)",
                    &[&(days as i32)],
                )
                .await?;
            Some(row.get::<_, DateTime<Utc>>(0))
        }
    };
    let budget = fits::training_budget(operator);
    let mut gathered = Gathered::within(budget.map(|b| b.bytes));
    let mut reads: Vec<Option<Read>> = sources.iter().map(|_| None).collect();
    let mut by_priority: Vec<usize> = (0..sources.len()).collect();
    by_priority.sort_by_key(|&i| match sources[i] {
        TrainSource::Set(_) => 0,
        TrainSource::Feedback { .. } => 1,
        TrainSource::Results { .. } => 2,
    });
    for i in by_priority {
        let read = read_into(
            pool,
            policy,
            &sources[i],
            columns,
            owner_share,
            &mut gathered,
        );
        reads[i] = Some(read.await?);
    }
    let held_bytes = gathered.held_bytes();
    let examples = gathered.into_examples();
    let mut counts = Vec::with_capacity(sources.len());
    let mut tickets = Vec::new();
    let mut provenance = Vec::with_capacity(sources.len());
    for (source, read) in sources.iter().zip(reads) {
        let read = read.expect("every source is read");
        let of_set = matches!(source, TrainSource::Set(_));
        provenance.push(SourceProvenance {
            source: source.to_string(),
            days: source.days(),
            examples: read.rows,
            from: read.provenance,
        });
        counts.push(SourceCount {
            source: source.to_string(),
            columns: columns.filter(|_| of_set).map(Columns::to_string),
            examples: read.rows,
            left_out: read.left_out,
        });
        tickets.extend(read.tickets);
    }
    if examples.is_empty() {
        let left_out: u64 = counts.iter().map(|c| c.left_out.memory).sum();
        let why = match budget {
            Some(budget) if left_out > 0 => format!(
                "no example fits the {} MB of this {} ({left_out} rows left out): raise its \
                 memory or run triage train where there is more",
                budget.memory_mb, budget.of
            ),
            _ => "these sources hold no example to learn from".into(),
        };
        return Err(InvalidRequest::new("from", why).into());
    }
    let departments = policy.departments.clone();
    // Seconds of arithmetic: off the async workers.
    // The thresholds for a target are cross-fitted on the same examples (folds of them).
    let (model, thresholds) = tokio::task::spawn_blocking(move || {
        let model = LocalModel::train(&examples, &departments)?;
        let derived = precision.map(|p| target::derive(&examples, &departments, p));
        Ok::<_, TrainError>((model, derived))
    })
    .await
    .expect("training does not panic")
    .map_err(|e| InvalidRequest::new("from", e.to_string()))?;
    let mut client = db::client(pool).await?;
    let recorded = serde_json::to_value(&counts).unwrap_or_default();
    let from = serde_json::to_value(&provenance).unwrap_or_default();
    // The classifier and the tickets it learnt from, together (erasure reads them).
    let transaction = client.transaction().await?;
    let stored = models::Stored {
        sources: &recorded,
        provenance: &from,
        trained_by,
        trained_from,
    };
    let new = models::store(&transaction, &model, stored).await?;
    trained_on::record(&transaction, &model.version(), &tickets).await?;
    if let Some(thresholds) = &thresholds {
        targets::store(&transaction, &model.version(), thresholds, trained_by).await?;
    }
    transaction.commit().await?;
    let trained = Trained {
        version: model.version(),
        new,
        examples: model.examples(),
        sources: counts,
        urgency: model.urgency(),
        bytes: model.to_bytes().len(),
        seconds: started.elapsed().as_secs_f64(),
        provenance,
        thresholds,
        budget,
        held_bytes,
    };
    let left_out: u64 = trained.sources.iter().map(|s| s.left_out.memory).sum();
    tracing::info!(version = %trained.version, examples = trained.examples, left_out_for_memory = left_out, held_bytes, seconds = trained.seconds, "local classifier trained");
    Ok(trained)
}

/// Reads a source into `gathered`: its rows read, the production tickets they were read from
/// (for a set, the tickets with a learnt row's text) and what it left out.
async fn read_into(
    pool: &Pool,
    policy: &Policy,
    source: &TrainSource,
    columns: Option<&Columns>,
    owner_share: f64,
    gathered: &mut Gathered,
) -> Result<Read> {
    Ok(match source {
        TrainSource::Set(set) => {
            let rows = LabelledSet::load(set, columns, policy, pool).await?.rows;
            let mut read = Read::default();
            let (mut subjects, mut messages) = (Vec::new(), Vec::new());
            for row in rows.into_iter().filter(|row| row.split == Split::Dev) {
                let (subject, message) = (row.subject.clone(), row.message.clone());
                let example = Example {
                    subject: row.subject,
                    message: row.message,
                    department: row.department,
                    is_urgent: row.is_urgent,
                    weight: 1.0,
                };
                match gathered.take(example, Standing::Desk) {
                    Taken::Full => read.left_out.memory += 1,
                    Taken::New | Taken::Merged => {
                        read.rows += 1;
                        subjects.push(subject);
                        messages.push(message);
                    }
                }
            }
            // A set's rows may be production tickets (a desk's history, `triage import`): those
            // are what it learnt from as much as a `results:` source's, and erasure names it.
            let client = db::client(pool).await?;
            read.tickets = trained_on::tickets_with_text(&client, &subjects, &messages).await?;
            read
        }
        TrainSource::Results { days } => {
            let mut client = db::client(pool).await?;
            examples::results(&mut client, *days as i32, policy, owner_share, gathered).await?
        }
        TrainSource::Feedback { days } => {
            let mut client = db::client(pool).await?;
            examples::feedback(&mut client, *days as i32, policy, owner_share, gathered).await?
        }
    })
}

/// The stored classifiers, newest first.
pub async fn list(pool: &Pool) -> Result<Vec<StoredModel>> {
    models::list(&db::client(pool).await?).await
}

/// Work under a cascade whose classifier is not stored would only fill the dead letters.
pub async fn stored_if_cascade(pool: &Pool, model: &ModelVersion, policy: &Policy) -> Result<()> {
    let Some(cascade) = model.cascade() else {
        return Ok(());
    };
    let client = db::client(pool).await?;
    let Some(local) = models::load(&client, &cascade.local).await? else {
        return Err(InvalidRequest::new(
            "model_version",
            format!(
                "{} is not stored: triage train makes it, triage models lists them",
                cascade.local
            ),
        )
        .into());
    };
    // A classifier is trained for one taxonomy: paired with another it would answer
    // departments the jobs do not have.
    let (mut trained, mut wanted) = (local.departments().to_vec(), policy.departments.clone());
    trained.sort();
    wanted.sort();
    if trained != wanted {
        return Err(InvalidRequest::new(
            "model_version",
            format!(
                "{} was trained for other departments than {}'s: train one with \
                 --policy-version {}",
                cascade.local, policy.version, policy.version
            ),
        )
        .into());
    }
    // A target names thresholds derived with the classifier: none derived, none to use.
    if let Some(p) = cascade.threshold.target() {
        if targets::load(&client, &cascade.local, p).await?.is_none() {
            let why = format!(
                "{} has no thresholds for the target precision {p}: train it with \
                 --precision {p} (triage models lists the targets each classifier has)",
                cascade.local
            );
            return Err(InvalidRequest::new("model_version", why).into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_read_as_spec_writes_them_and_the_test_split_never_trains() {
        let parse = |s: &str| s.parse::<TrainSource>();
        assert_eq!(
            parse("set:evals/tickets.jsonl:dev").unwrap(),
            TrainSource::Set(SetSource::Path("evals/tickets.jsonl".into()))
        );
        assert_eq!(
            parse("set:shipped").unwrap(),
            TrainSource::Set(SetSource::Shipped)
        );
        assert_eq!(
            parse("results:30").unwrap(),
            TrainSource::Results { days: 30 }
        );
        assert_eq!(
            parse("feedback:7").unwrap().to_string(),
            "feedback:7".to_string()
        );
        for bad in [
            "set:evals/tickets.jsonl:test",
            "set:feedback:30",
            "results:0",
            "results:x",
            "feedback:400",
            "evals/tickets.jsonl",
            "set:",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
