//! What `triage train --from` reads: a labelled set's dev split (never a test family: those
//! judge the classifier), the large model's answers of the last days, the desk's corrections.

use std::{fmt, str::FromStr};

use deadpool_postgres::Pool;

use crate::{
    db,
    domain::error::{InvalidRequest, Result},
    pipeline::cascade::{
        caps::Shares,
        examples::{self, Read, Window},
        gather::{Gathered, Standing, Taken},
        trained_on,
    },
    providers::{classifier::Example, Policy},
    quality::{
        set::{Columns, LabelledSet, Split},
        source::SetSource,
    },
};

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
    pub(super) fn days(&self) -> Option<u32> {
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

/// Reads a source into `gathered`: its rows read, the production tickets they were read from
/// (for a set, the tickets with a learnt row's text) and what it left out. The desk's givers
/// are capped beside `others`, the weight of the training's other examples.
pub(super) async fn read_into(
    pool: &Pool,
    policy: &Policy,
    source: &TrainSource,
    columns: Option<&Columns>,
    (shares, others): (Shares, f64),
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
            let window = Window::last(*days);
            examples::results(&mut client, window, policy, shares.owner, gathered).await?
        }
        TrainSource::Feedback { days } => {
            let mut client = db::client(pool).await?;
            let (window, caps) = (Window::last(*days), (shares, others));
            examples::feedback(&mut client, window, policy, caps, gathered).await?
        }
    })
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
