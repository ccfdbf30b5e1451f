//! `triage train --from SOURCE...` and `triage models` (docs/cascade.md): a local classifier
//! built from any mix of a labelled set's dev split (never a test family: those judge it), the
//! large model's own answers of the last days (distillation) and the desk's corrections,
//! stored by content for every function to load by version.

use std::time::Instant;

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;

pub use super::sources::TrainSource;
use super::{
    super::{
        audit::Operator,
        fits::{self, Budget},
    },
    sources::read_into,
};
use crate::quality::set::Columns;
use crate::{
    db,
    domain::{
        error::{InvalidRequest, Result},
        versions::ModelVersion,
    },
    pipeline::cascade::{
        caps::Shares,
        examples::{self, Read, Window},
        gather::{Gathered, LeftOut},
        models::{self, StoredModel},
        targets, trained_on,
    },
    providers::{
        classifier::{
            target::{self, Thresholds},
            LocalModel, TrainError,
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
/// left out. Each database source gives each ticket owner at most `shares.owner` of its
/// examples (`TRIAGE_TRAIN_OWNER_SHARE`), and no giver of the desk's labels carries more than
/// `shares.giver` of the examples' weight (`TRIAGE_TRAIN_GIVER_SHARE`; docs/labelling.md).
pub async fn train(
    pool: &Pool,
    policy: &Policy,
    sources: &[TrainSource],
    columns: Option<&Columns>,
    operator: &Operator,
    shares: Shares,
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
    // The weight beside the desk's labels that their givers' shares are of: the model's
    // answers (before the memory's budget) and the sets' rows read before them, 1 each.
    // Counted only where there are desk labels to cap.
    let mut others = 0.0;
    let capped = sources
        .iter()
        .any(|s| matches!(s, TrainSource::Feedback { .. }));
    for source in sources.iter().filter(|_| capped) {
        if let TrainSource::Results { days } = source {
            let mut client = db::client(pool).await?;
            let window = Window::last(*days);
            others += examples::results_weight(&mut client, window, policy, shares.owner).await?;
        }
    }
    for i in by_priority {
        let caps = (shares, others);
        let read = read_into(pool, policy, &sources[i], columns, caps, &mut gathered).await?;
        if matches!(sources[i], TrainSource::Set(_)) {
            others += read.rows as f64;
        }
        reads[i] = Some(read);
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
