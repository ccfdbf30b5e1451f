//! A labelled set (`evals/*.jsonl`, docs/quality.md): one ticket a line, identified as a whole
//! by the SHA-256 of its bytes, so a run made on another version of the set never counts as
//! this one's. A desk's own set may be CSV, its columns named ([`columns`]), and may leave the
//! split to [`split`]. Where a set is read from is [`super::source`].

pub mod columns;
pub mod split;

use std::{collections::HashMap, fmt, path::Path, str::FromStr};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{domain::error::InvalidRequest, providers::Policy};
pub use columns::Columns;

/// The set shipped in `evals/tickets.jsonl`, built into every binary: a Lambda has no repo.
pub const SHIPPED: &[u8] = include_bytes!("../../../evals/tickets.jsonl");

/// Its SHA-256, the promote gate's default (`TRIAGE_EVAL_SET` unset); a test holds it to
/// [`SHIPPED`].
pub const SHIPPED_DIGEST: &str = "b76d82e3710f7b304f58a64d2e37d5eb2d5c7fbc0f148f8b19681b4da22dfe61";

/// The largest set read from S3 or a file: about 50,000 tickets, far more than an eval needs,
/// and a bound on what one ops invocation holds in memory.
pub const MAX_SET_BYTES: u64 = 32 * 1024 * 1024;

/// The split a row belongs to: `dev` for tuning prompts, `test` only reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Dev,
    Test,
}

impl Split {
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Dev => "dev",
            Split::Test => "test",
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Split {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dev" => Ok(Split::Dev),
            "test" => Ok(Split::Test),
            _ => Err(InvalidRequest::new(
                "split",
                format!("{s:?}: expected dev or test"),
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    pub id: String,
    pub subject: String,
    pub message: String,
    pub department: String,
    pub is_urgent: bool,
    pub split: Split,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The scenario family (a base ticket with its translations, paraphrases, forwards,
    /// follow-ups and duplicates; shared/SPEC.md): one family, one split. A set without it
    /// makes each row its own family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// The production ticket the row is (`--set feedback`): evaluated in place, never copied
    /// into an eval ticket, so erasing it leaves nothing behind.
    #[serde(skip)]
    pub ticket: Option<uuid::Uuid>,
}

impl Row {
    /// The row's family: its `family`, else its id.
    pub fn family(&self) -> &str {
        self.family.as_deref().unwrap_or(&self.id)
    }
}

/// A row as its file gives it: a desk's set may leave the split (and the family) to
/// [`split::assign`], and a CSV set may order rows by time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Draft {
    id: String,
    subject: String,
    message: String,
    department: String,
    is_urgent: bool,
    #[serde(default)]
    split: Option<Split>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    family: Option<String>,
    #[serde(skip)]
    time: Option<DateTime<Utc>>,
    /// The line it starts on, to name it in an error.
    #[serde(skip)]
    line: u64,
}

/// How a set's bytes are read: JSONL rows, or CSV by its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv(Columns),
}

impl Format {
    /// CSV when columns are named or the set's name ends in `.csv` (then columns keep the
    /// JSONL fields' names unless named), else JSONL.
    pub fn of(name: &str, columns: Option<&Columns>) -> Self {
        match columns {
            Some(columns) => Format::Csv(columns.clone()),
            None if name.to_ascii_lowercase().ends_with(".csv") => Format::Csv(Columns::default()),
            None => Format::Jsonl,
        }
    }

    /// The set's digest: the SHA-256 of its bytes, and for CSV of the columns read too (the
    /// same file read with another label column is another set).
    pub fn digest(&self, bytes: &[u8]) -> String {
        match self {
            Format::Jsonl => digest(bytes),
            Format::Csv(columns) => {
                let mut hash = Sha256::new();
                hash.update(bytes);
                hash.update(format!("\0csv columns: {columns}").as_bytes());
                hex::encode(hash.finalize())
            }
        }
    }
}

/// The one check of a row's department against the set's taxonomy.
fn check_department(policy: &Policy, department: &str) -> Result<(), String> {
    if policy.departments.iter().any(|d| d == department) {
        return Ok(());
    }
    Err(format!(
        "department {department:?} is not one of {}'s",
        policy.version
    ))
}

/// A parsed set: its digest and its rows, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledSet {
    pub digest: String,
    pub rows: Vec<Row>,
}

/// SHA-256 of the set's bytes, lowercase hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl LabelledSet {
    pub fn read(path: &Path, format: &Format, policy: &Policy) -> Result<Self, InvalidRequest> {
        let too_large = std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_SET_BYTES);
        if too_large {
            return Err(InvalidRequest::new(
                "set",
                format!("{} is larger than {MAX_SET_BYTES} bytes", path.display()),
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| {
            InvalidRequest::new("set", format!("cannot read {}: {e}", path.display()))
        })?;
        Self::parse_as(&bytes, format, policy)
    }

    /// A JSONL set: [`Self::parse_as`] with [`Format::Jsonl`].
    pub fn parse(bytes: &[u8], policy: &Policy) -> Result<Self, InvalidRequest> {
        Self::parse_as(bytes, &Format::Jsonl, policy)
    }

    /// Every row valid, with a department of `policy`; a bad row is named by its line, and
    /// nothing is evaluated. An id given again is the same ticket exported again (`triage
    /// import` appends what changed since): its last row, the newest, is the one kept. Rows are
    /// split as the set says, or, when it says nowhere, by [`split::assign`]; a set that
    /// splits some rows and not others is refused.
    pub fn parse_as(
        bytes: &[u8],
        format: &Format,
        policy: &Policy,
    ) -> Result<Self, InvalidRequest> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| InvalidRequest::new("set", format!("not UTF-8: {e}")))?;
        let drafts = match format {
            Format::Jsonl => jsonl(text)?,
            Format::Csv(columns) => columns.read(text)?,
        };
        let drafts = newest_of_each_id(drafts);
        for row in &drafts {
            let bad = |why: String| InvalidRequest::new("set", format!("line {}: {why}", row.line));
            check_department(policy, &row.department).map_err(bad)?;
            if row.subject.trim().is_empty() || row.message.trim().is_empty() {
                return Err(bad("subject and message must not be empty".into()));
            }
        }
        if drafts.is_empty() {
            return Err(InvalidRequest::new("set", "the set has no rows".into()));
        }
        Ok(Self {
            digest: format.digest(bytes),
            rows: split_rows(drafts)?,
        })
    }

    /// The rows of `split`, or all of them.
    pub fn rows_of(&self, split: Option<Split>) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| split.is_none_or(|s| r.split == s))
            .collect()
    }
}

/// The rows with each id's last one only, in the order of the rows kept.
fn newest_of_each_id(drafts: Vec<Draft>) -> Vec<Draft> {
    let last: HashMap<String, usize> = drafts
        .iter()
        .enumerate()
        .map(|(at, row)| (row.id.clone(), at))
        .collect();
    drafts
        .into_iter()
        .enumerate()
        .filter(|(at, row)| last[&row.id] == *at)
        .map(|(_, row)| row)
        .collect()
}

fn jsonl(text: &str) -> Result<Vec<Draft>, InvalidRequest> {
    let mut drafts = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_number = number as u64 + 1;
        let mut draft: Draft = serde_json::from_str(line)
            .map_err(|e| InvalidRequest::new("set", format!("line {line_number}: {e}")))?;
        draft.line = line_number;
        drafts.push(draft);
    }
    Ok(drafts)
}

/// The rows, with the split the set gives every one of them or none.
fn split_rows(drafts: Vec<Draft>) -> Result<Vec<Row>, InvalidRequest> {
    let given = drafts.iter().filter(|d| d.split.is_some()).count();
    let assigned = if given == drafts.len() {
        drafts
            .iter()
            .map(|d| (d.family.clone(), d.split.unwrap_or(Split::Test)))
            .collect()
    } else if given == 0 {
        let items: Vec<split::Item> = drafts
            .iter()
            .map(|d| split::Item {
                text: format!("{}\n{}", d.subject, d.message),
                family: d.family.as_deref(),
                time: d.time,
            })
            .collect();
        let ids: Vec<&str> = drafts.iter().map(|d| d.id.as_str()).collect();
        split::assign(&items, &ids)
    } else {
        let missing = drafts
            .iter()
            .find(|d| d.split.is_none())
            .map_or(0, |d| d.line);
        return Err(InvalidRequest::new(
            "set",
            format!("line {missing}: no split, where {given} rows have one: give every row a split or none"),
        ));
    };
    Ok(drafts
        .into_iter()
        .zip(assigned)
        .map(|(d, (family, split))| Row {
            id: d.id,
            subject: d.subject,
            message: d.message,
            department: d.department,
            is_urgent: d.is_urgent,
            split,
            tags: d.tags,
            family,
            ticket: None,
        })
        .collect())
}

#[cfg(test)]
mod tests;
