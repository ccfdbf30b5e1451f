//! A labelled set (`evals/*.jsonl`, docs/quality.md): one ticket a line, identified as a whole
//! by the SHA-256 of its bytes, so a run made on another version of the set never counts as
//! this one's. Where a set is read from is [`super::source`].

use std::{collections::HashSet, fmt, path::Path, str::FromStr};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{domain::error::InvalidRequest, providers::Policy};

/// The set shipped in `evals/tickets.jsonl`, built into every binary: a Lambda has no repo.
pub const SHIPPED: &[u8] = include_bytes!("../../../evals/tickets.jsonl");

/// Its SHA-256, the promote gate's default (`TRIAGE_EVAL_SET` unset); a test holds it to
/// [`SHIPPED`].
pub const SHIPPED_DIGEST: &str = "ec3bea5f1996d5ca561db6d91e39fad021c12b3f26d2df2acf528b0972f078d9";

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
    pub fn read(path: &Path, policy: &Policy) -> Result<Self, InvalidRequest> {
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
        Self::parse(&bytes, policy)
    }

    /// Every line a valid row with a unique id and a department of `policy`; a bad line is
    /// named by its number, and nothing is evaluated.
    pub fn parse(bytes: &[u8], policy: &Policy) -> Result<Self, InvalidRequest> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| InvalidRequest::new("set", format!("not UTF-8: {e}")))?;
        let mut rows = Vec::new();
        let mut ids = HashSet::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad =
                |why: String| InvalidRequest::new("set", format!("line {}: {why}", number + 1));
            let row: Row = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
            if !policy.departments.contains(&row.department) {
                return Err(bad(format!(
                    "department {:?} is not one of {}'s",
                    row.department, policy.version
                )));
            }
            if row.subject.trim().is_empty() || row.message.trim().is_empty() {
                return Err(bad("subject and message must not be empty".into()));
            }
            if !ids.insert(row.id.clone()) {
                return Err(bad(format!("id {:?} appears twice", row.id)));
            }
            rows.push(row);
        }
        if rows.is_empty() {
            return Err(InvalidRequest::new("set", "the set has no rows".into()));
        }
        Ok(Self {
            digest: digest(bytes),
            rows,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::load("policy-v1").unwrap()
    }

    const ROW: &str = r#"{"id":"a","subject":"s","message":"m","department":"billing","is_urgent":false,"split":"test"}"#;

    #[test]
    fn a_set_parses_and_its_digest_is_the_sha256_of_its_bytes() {
        let set = LabelledSet::parse(format!("{ROW}\n").as_bytes(), &policy()).unwrap();
        assert_eq!(set.rows.len(), 1);
        assert_eq!(set.digest, digest(format!("{ROW}\n").as_bytes()));
        assert_ne!(
            set.digest,
            digest(ROW.as_bytes()),
            "one byte more is another set"
        );
        assert_eq!(set.rows_of(Some(Split::Dev)).len(), 0);
        assert_eq!(set.rows_of(Some(Split::Test)).len(), 1);
    }

    #[test]
    fn the_shipped_set_parses_and_its_digest_is_the_gates_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../evals/tickets.jsonl");
        let set = LabelledSet::read(Path::new(path), &policy()).unwrap();
        assert_eq!(
            set.digest, SHIPPED_DIGEST,
            "update SHIPPED_DIGEST with the set"
        );
        assert_eq!(
            digest(SHIPPED),
            SHIPPED_DIGEST,
            "the built-in copy is the file"
        );
        assert!(set.rows.len() >= 400);
    }

    /// The split evals/assemble.py gives a family: test when the first byte of SHA-256 of its
    /// id is below 141 (about 55%), else dev. A function of the id alone, so adding tickets
    /// never moves a family.
    fn split_of(family: &str) -> Split {
        if Sha256::digest(family.as_bytes())[0] < 141 {
            Split::Test
        } else {
            Split::Dev
        }
    }

    fn shipped() -> LabelledSet {
        LabelledSet::parse(SHIPPED, &policy()).unwrap()
    }

    #[test]
    fn every_shipped_row_has_a_family_and_the_split_its_family_id_gives() {
        for row in shipped().rows {
            let family = row.family.as_deref();
            assert!(
                family.is_some_and(|f| f.starts_with("fam-")),
                "{}: no family",
                row.id
            );
            assert_eq!(row.split, split_of(row.family()), "{}: split moved", row.id);
        }
        // The same function as assemble.py's split_of: first bytes 190 and 53.
        assert_eq!(split_of("fam-refund-closed-card"), Split::Dev);
        assert_eq!(split_of("fam-dashboard-down"), Split::Test);
    }

    #[test]
    fn no_shipped_family_spans_both_splits_or_has_two_labels() {
        let mut families: std::collections::HashMap<&str, (&Row, usize)> = Default::default();
        let set = shipped();
        for row in &set.rows {
            let (first, members) = families.entry(row.family()).or_insert((row, 0));
            *members += 1;
            assert_eq!(
                row.split, first.split,
                "{} and {}: one family, two splits",
                row.id, first.id
            );
            assert_eq!(
                (&row.department, row.is_urgent),
                (&first.department, first.is_urgent),
                "{} and {}: one family, two labels",
                row.id,
                first.id
            );
        }
        let across_languages = families
            .keys()
            .filter(|family| {
                let langs: HashSet<&str> = set
                    .rows
                    .iter()
                    .filter(|r| r.family() == **family)
                    .flat_map(|r| r.tags.iter().filter(|t| t.starts_with("lang:")))
                    .map(String::as_str)
                    .collect();
                langs.len() > 1
            })
            .count();
        assert!(
            across_languages >= 30,
            "{across_languages} families in several languages"
        );
    }

    #[test]
    fn the_shipped_test_split_has_150_families_and_an_urgent_share_like_devs() {
        let set = shipped();
        let families = |split| {
            let rows = set.rows_of(Some(split));
            rows.iter()
                .map(|r| r.family())
                .collect::<HashSet<_>>()
                .len()
        };
        let urgent_share = |split| {
            let rows = set.rows_of(Some(split));
            rows.iter().filter(|r| r.is_urgent).count() as f64 / rows.len() as f64
        };
        assert!(
            families(Split::Test) >= 150,
            "{} families in test",
            families(Split::Test)
        );
        assert!(
            families(Split::Dev) >= 120,
            "{} families in dev",
            families(Split::Dev)
        );
        let (dev, test) = (urgent_share(Split::Dev), urgent_share(Split::Test));
        assert!(
            (dev - test).abs() <= 0.05,
            "urgent share: dev {dev:.3}, test {test:.3}"
        );
    }

    #[test]
    fn bad_rows_are_refused_by_line_number() {
        let cases = [
            (format!("{ROW}\n{ROW}"), "line 2: id \"a\" appears twice"),
            (
                ROW.replace("billing", "legal"),
                "line 1: department \"legal\"",
            ),
            (
                ROW.replace("\"test\"", "\"train\""),
                "line 1: unknown variant",
            ),
            (ROW.replace("\"s\"", "\" \""), "line 1: subject and message"),
            ("\n".to_string(), "no rows"),
        ];
        for (text, expected) in cases {
            let error = LabelledSet::parse(text.as_bytes(), &policy()).unwrap_err();
            assert!(error.to_string().contains(expected), "{error} / {expected}");
        }
    }
}
