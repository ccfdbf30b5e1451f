//! Where a labelled set is read from ([`SetSource`]): the set built into the binary, an object
//! in S3, a file, or the help desk's feedback; and the digest of the set the promote gate and
//! the Quality page judge by (`TRIAGE_EVAL_SET`).

use std::{fmt, path::PathBuf, str::FromStr};

use deadpool_postgres::Pool;
use sha2::{Digest, Sha256};

use super::set::{
    digest, Columns, Format, LabelledSet, Row, Split, MAX_SET_BYTES, SHIPPED, SHIPPED_DIGEST,
};
use crate::{
    aws::s3::{self, S3Location},
    db,
    domain::error::{InvalidRequest, Result},
    pipeline::feedback,
    providers::Policy,
};

/// Where a set is read from: `shipped`, `s3://BUCKET/KEY` (the ops Lambda's own sets), a
/// file's path (the CLI's), or `feedback[:DAYS]`: the production tickets the help desk labelled
/// in the last DAYS days (30 by default), with the desk's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetSource {
    Shipped,
    S3(S3Location),
    Path(PathBuf),
    Feedback { days: u32 },
}

/// `--set feedback` looks this many days back unless `--days` says otherwise.
pub const DEFAULT_FEEDBACK_DAYS: u32 = 30;

impl FromStr for SetSource {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "shipped" => Ok(SetSource::Shipped),
            "feedback" => Ok(SetSource::Feedback {
                days: DEFAULT_FEEDBACK_DAYS,
            }),
            _ if s.starts_with("feedback:") => s["feedback:".len()..]
                .parse()
                .ok()
                .filter(|days| (1..=366).contains(days))
                .map(|days| SetSource::Feedback { days })
                .ok_or_else(|| {
                    InvalidRequest::new("set", format!("{s:?}: feedback:DAYS, 1 to 366"))
                }),
            "" => Err(InvalidRequest::new(
                "set",
                "give shipped, s3://BUCKET/KEY or a file's path".into(),
            )),
            _ if s.starts_with("s3://") => s.parse().map(SetSource::S3),
            _ => Ok(SetSource::Path(s.into())),
        }
    }
}

impl fmt::Display for SetSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetSource::Shipped => f.write_str("shipped"),
            SetSource::S3(location) => location.fmt(f),
            SetSource::Path(path) => path.display().fmt(f),
            SetSource::Feedback { days } => write!(f, "feedback:{days}"),
        }
    }
}

/// The digest of the set `TRIAGE_EVAL_SET` names (the promote gate's and the Quality page's):
/// `sha256:HEX` as given (an S3 set's, as its eval run reports it), a path's file hashed, or,
/// unset or `shipped`, the shipped set's.
pub fn configured_digest(setting: Option<&str>) -> Result<String, InvalidRequest> {
    match setting {
        None | Some("shipped") => Ok(SHIPPED_DIGEST.to_string()),
        Some(value) => match value.strip_prefix("sha256:") {
            Some(hex) => Ok(hex.to_ascii_lowercase()),
            None => std::fs::read(value)
                .map(|bytes| Format::of(value, None).digest(&bytes))
                .map_err(|e| {
                    InvalidRequest::new(
                        "TRIAGE_EVAL_SET",
                        format!("cannot read {value}: {e} (or give sha256:HEX)"),
                    )
                }),
        },
    }
}

/// [`configured_digest`], where `feedback[:DAYS]` names the desk's feedback set as it is now
/// (read from `pool`): the gate then wants runs on exactly today's labelled tickets.
pub async fn configured_digest_now(
    setting: Option<&str>,
    policy: &Policy,
    pool: &Pool,
) -> Result<String> {
    match setting.map(str::parse::<SetSource>) {
        Some(Ok(source @ SetSource::Feedback { .. })) => {
            Ok(LabelledSet::load(&source, None, policy, pool).await?.digest)
        }
        _ => Ok(configured_digest(setting)?),
    }
}

impl LabelledSet {
    /// The set `source` names, read with the standard `AWS_*` variables for S3 and from
    /// `pool` for the desk's feedback; a file or object as CSV by `columns` when given or
    /// when its name ends in `.csv` ([`Format::of`]).
    pub async fn load(
        source: &SetSource,
        columns: Option<&Columns>,
        policy: &Policy,
        pool: &Pool,
    ) -> Result<Self> {
        if columns.is_some() && matches!(source, SetSource::Shipped | SetSource::Feedback { .. }) {
            return Err(InvalidRequest::new(
                "columns",
                format!("{source} is no CSV: columns name a CSV file's or object's"),
            )
            .into());
        }
        let format = Format::of(&source.to_string(), columns);
        Ok(match source {
            SetSource::Shipped => Self::parse(SHIPPED, policy)?,
            SetSource::S3(location) => {
                let env = |name: &str| std::env::var(name).ok();
                let bytes = s3::get_object(location, MAX_SET_BYTES, env).await?;
                Self::parse_as(&bytes, &format, policy)?
            }
            SetSource::Path(path) => Self::read(path, &format, policy)?,
            SetSource::Feedback { days } => {
                let labelled = feedback::labelled(&db::client(pool).await?, *days).await?;
                Self::of_feedback(labelled, *days)?
            }
        })
    }

    /// The desk's labelled tickets as a set: all in `test` (real traffic is only reported),
    /// each content a family of its own (duplicates share one), each row tagged with its
    /// label's provenance (`source:desk`), and the digest of the rows' tickets and labels, so
    /// two runs compare on exactly the same feedback.
    fn of_feedback(
        labelled: Vec<feedback::LabelledTicket>,
        days: u32,
    ) -> Result<Self, InvalidRequest> {
        if labelled.is_empty() {
            return Err(InvalidRequest::new(
                "set",
                format!("the help desk labelled no ticket in the last {days} days"),
            ));
        }
        let mut canonical = Vec::new();
        let rows = labelled
            .into_iter()
            .map(|t| {
                let content = Sha256::digest(format!("{}\0{}", t.subject, t.message));
                let line = format!("{}\t{}\t{}\n", t.ticket_id.0, t.department, t.is_urgent);
                canonical.extend_from_slice(line.as_bytes());
                Row {
                    id: t.ticket_id.0.to_string(),
                    subject: t.subject,
                    message: t.message,
                    department: t.department,
                    is_urgent: t.is_urgent,
                    split: Split::Test,
                    tags: vec!["feedback".into(), format!("source:{}", t.source)],
                    family: Some(format!("content-{}", &hex::encode(content)[..16])),
                    ticket: Some(t.ticket_id.0),
                }
            })
            .collect();
        Ok(Self {
            digest: digest(&canonical),
            rows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set built from production says where each label came from.
    #[test]
    fn a_feedback_set_tags_each_row_with_its_labels_source() {
        let ticket = |source: &str| feedback::LabelledTicket {
            ticket_id: crate::domain::ticket::TicketId::new(),
            subject: "Refund".into(),
            message: "Charged twice".into(),
            department: "billing".into(),
            is_urgent: false,
            source: source.into(),
        };
        let set = LabelledSet::of_feedback(vec![ticket("desk"), ticket("audit")], 7).unwrap();
        let tags: Vec<&str> = set.rows.iter().map(|r| r.tags[1].as_str()).collect();
        assert_eq!(tags, ["source:desk", "source:audit"]);
    }

    #[test]
    fn a_set_is_named_shipped_s3_or_a_path() {
        assert_eq!("shipped".parse::<SetSource>().unwrap(), SetSource::Shipped);
        let s3 = "s3://sets-bucket/v2.jsonl".parse::<SetSource>().unwrap();
        assert!(matches!(&s3, SetSource::S3(at) if at.key == "v2.jsonl"));
        assert_eq!(s3.to_string(), "s3://sets-bucket/v2.jsonl");
        assert_eq!(
            "evals/tickets.jsonl".parse::<SetSource>().unwrap(),
            SetSource::Path("evals/tickets.jsonl".into())
        );
        assert!("s3://x".parse::<SetSource>().is_err());
        assert!("".parse::<SetSource>().is_err());
    }
}
