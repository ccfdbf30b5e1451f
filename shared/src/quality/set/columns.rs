//! A desk's own set as CSV (docs/quality.md, "Your desk's own set"): which column holds what
//! is named on the command line (`--columns text=body,label=queue,...`), since every help
//! desk's export names its columns its own way.

use std::{collections::HashMap, fmt, str::FromStr};

use chrono::{DateTime, Utc};

use super::{Draft, Split};
use crate::domain::error::InvalidRequest;

/// What a column of a CSV set holds. `text` and `label` are needed; the rest are optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Role {
    Id,
    Subject,
    Text,
    Label,
    Urgent,
    Family,
    Time,
    Split,
}

const ROLES: [(Role, &str); 8] = [
    (Role::Id, "id"),
    (Role::Subject, "subject"),
    (Role::Text, "text"),
    (Role::Label, "label"),
    (Role::Urgent, "urgent"),
    (Role::Family, "family"),
    (Role::Time, "time"),
    (Role::Split, "split"),
];

/// The subject of a row whose set has no subject column: a ticket has one (`POST /tickets`
/// refuses a blank one), and a constant tells the classifier nothing.
pub const NO_SUBJECT: &str = "(no subject)";

/// `--columns`: role=header pairs. Roles not named are read from a column of the role's
/// JSONL name when the header has one (`subject`, `message` for text, `department` for label,
/// `is_urgent` for urgent, `id`, `family`, `split`, `time`), so a CSV with the JSONL set's
/// fields needs no flag.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Columns(Vec<(Role, String)>);

impl FromStr for Columns {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: String| InvalidRequest::new("columns", why);
        let mut pairs: Vec<(Role, String)> = Vec::new();
        for pair in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (role, header) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("{pair:?}: give ROLE=HEADER")))?;
            let role = ROLES
                .iter()
                .find(|(_, name)| *name == role.trim())
                .map(|(role, _)| *role)
                .ok_or_else(|| {
                    bad(format!(
                        "{role:?}: roles are text, subject, label, urgent, family, time, id, split"
                    ))
                })?;
            if pairs.iter().any(|(r, _)| *r == role) {
                return Err(bad(format!("{} is named twice", name_of(role))));
            }
            if header.trim().is_empty() {
                return Err(bad(format!("{}: no header given", name_of(role))));
            }
            pairs.push((role, header.trim().to_string()));
        }
        if pairs.iter().any(|(r, _)| *r == Role::Family)
            && pairs.iter().any(|(r, _)| *r == Role::Time)
        {
            return Err(bad(
                "family or time, not both: families group rows, time orders them".into(),
            ));
        }
        pairs.sort();
        Ok(Self(pairs))
    }
}

impl fmt::Display for Columns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = self
            .0
            .iter()
            .map(|(role, header)| format!("{}={header}", name_of(*role)))
            .collect();
        f.write_str(&pairs.join(","))
    }
}

fn name_of(role: Role) -> &'static str {
    ROLES
        .iter()
        .find(|(r, _)| *r == role)
        .map_or("", |(_, n)| n)
}

/// The header a role is read from by default.
fn default_header(role: Role) -> &'static str {
    match role {
        Role::Text => "message",
        Role::Label => "department",
        Role::Urgent => "is_urgent",
        other => name_of(other),
    }
}

impl Columns {
    /// The rows of a CSV set (RFC 4180, a header line first), each named by its line.
    pub(super) fn read(&self, text: &str) -> Result<Vec<Draft>, InvalidRequest> {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(false)
            .from_reader(text.as_bytes());
        let headers = reader
            .headers()
            .map_err(|e| InvalidRequest::new("set", format!("CSV header: {e}")))?
            .clone();
        let at: HashMap<&str, usize> = headers
            .iter()
            .enumerate()
            .map(|(i, h)| (h.trim(), i))
            .collect();
        let mut index = HashMap::new();
        for (role, _) in ROLES {
            let named = self
                .0
                .iter()
                .find(|(r, _)| *r == role)
                .map(|(_, h)| h.as_str());
            match (named, at.get(named.unwrap_or(default_header(role)))) {
                (_, Some(i)) => {
                    index.insert(role, *i);
                }
                (Some(header), None) => {
                    return Err(InvalidRequest::new(
                        "columns",
                        format!(
                            "{}={header}: the CSV has no column {header:?}",
                            name_of(role)
                        ),
                    ))
                }
                (None, None) if matches!(role, Role::Text | Role::Label) => {
                    return Err(InvalidRequest::new(
                        "columns",
                        format!(
                            "name the {} column (--columns {}=HEADER); the CSV has {}",
                            name_of(role),
                            name_of(role),
                            headers.iter().collect::<Vec<_>>().join(", ")
                        ),
                    ))
                }
                (None, None) => {}
            }
        }
        if index.contains_key(&Role::Family) && index.contains_key(&Role::Time) {
            index.remove(&Role::Time);
        }
        let mut drafts = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| InvalidRequest::new("set", format!("CSV: {e}")))?;
            let line = record.position().map_or(0, |p| p.line());
            let bad = |why: String| InvalidRequest::new("set", format!("line {line}: {why}"));
            let cell = |role| index.get(&role).and_then(|i| record.get(*i)).map(str::trim);
            let given = |role| cell(role).filter(|v| !v.is_empty());
            drafts.push(Draft {
                id: given(Role::Id).map_or_else(|| format!("row-{line}"), str::to_string),
                subject: given(Role::Subject).unwrap_or(NO_SUBJECT).to_string(),
                message: cell(Role::Text).unwrap_or_default().to_string(),
                department: cell(Role::Label).unwrap_or_default().to_string(),
                is_urgent: given(Role::Urgent)
                    .map(boolean)
                    .transpose()
                    .map_err(bad)?
                    .unwrap_or(false),
                split: given(Role::Split)
                    .map(str::parse::<Split>)
                    .transpose()
                    .map_err(|e| bad(e.to_string()))?,
                tags: Vec::new(),
                family: given(Role::Family).map(str::to_string),
                time: given(Role::Time).map(instant).transpose().map_err(bad)?,
                line,
            });
        }
        Ok(drafts)
    }
}

fn boolean(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "y" | "t" => Ok(true),
        "false" | "0" | "no" | "n" | "f" => Ok(false),
        _ => Err(format!(
            "urgent {value:?}: expected true/false, 1/0 or yes/no"
        )),
    }
}

/// RFC 3339, or a date alone (midnight UTC), as exports write them.
fn instant(value: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
        })
        .map_err(|_| format!("time {value:?}: expected RFC 3339 or YYYY-MM-DD"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_parse_in_any_order_and_print_canonically() {
        let columns: Columns = "label=queue, text=body,urgent=p1".parse().unwrap();
        assert_eq!(columns.to_string(), "text=body,label=queue,urgent=p1");
        for (bad, says) in [
            ("text", "ROLE=HEADER"),
            ("body=text", "roles are"),
            ("text=a,text=b", "text is named twice"),
            ("text=", "no header"),
            ("family=f,time=t", "family or time"),
        ] {
            let error = bad.parse::<Columns>().unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn a_csv_is_read_by_its_named_columns_with_quotes_and_newlines() {
        let csv = "ticket,title,body,queue,p1,opened\n\
                   7,Card,\"Charged twice, \"\"today\"\"\nplease\",billing,yes,2026-11-02\n\
                   8,,Login loop,account,0,2026-11-03T10:00:00Z\n";
        let columns: Columns =
            "id=ticket,subject=title,text=body,label=queue,urgent=p1,time=opened"
                .parse()
                .unwrap();
        let rows = columns.read(csv).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].id, "7");
        assert_eq!(rows[0].message, "Charged twice, \"today\"\nplease");
        assert!(rows[0].is_urgent);
        assert_eq!(rows[1].subject, NO_SUBJECT, "an empty subject cell");
        assert!(rows[1].time.unwrap() > rows[0].time.unwrap());
        let missing = "text=body,label=team".parse::<Columns>().unwrap().read(csv);
        assert!(missing
            .unwrap_err()
            .to_string()
            .contains("no column \"team\""));
        let unnamed = Columns::default().read(csv).unwrap_err().to_string();
        assert!(unnamed.contains("name the text column"), "{unnamed}");
        let bad = csv.replace(",yes,", ",maybe,");
        assert!(columns
            .read(&bad)
            .unwrap_err()
            .to_string()
            .contains("line 2: urgent \"maybe\""));
    }
}
