//! A desk's taxonomy (docs/taxonomy.md): its departments with their one-line definitions, the
//! definition of urgent and the urgent threshold, written by the deploying team as a JSON file
//! (format in SPEC, "Taxonomies"). Parsed strictly, once, at the edge; versioned by its
//! content, so the same file is the same version and any edit is a new one.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::InvalidRequest;

/// Departments a taxonomy must have at least, and may have at most.
pub const MIN_DEPARTMENTS: usize = 2;
pub const MAX_DEPARTMENTS: usize = 300;
/// A department's definition, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 300;
/// The definition of urgent, in characters: one paragraph.
pub const MAX_URGENT_CHARS: usize = 2000;
/// A taxonomy file, in bytes: 300 departments of 300 characters, with room for the rest.
pub const MAX_FILE_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taxonomy {
    pub name: String,
    pub departments: Vec<Department>,
    pub urgent: String,
    pub urgent_threshold: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Department {
    pub name: String,
    pub description: String,
    /// The Zendesk group a ticket of this department is routed to (docs/zendesk.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zendesk_group_id: Option<i64>,
}

impl Taxonomy {
    /// A taxonomy file, validated: the first thing wrong is named by its field (and its
    /// department), e.g. `departments[3].name: "Card Arrival" (department 4) is not ...`.
    pub fn parse(file: &[u8]) -> Result<Self, InvalidRequest> {
        if file.len() > MAX_FILE_BYTES {
            return Err(InvalidRequest::new(
                "taxonomy",
                format!(
                    "the file is {} bytes; a taxonomy is at most {MAX_FILE_BYTES}",
                    file.len()
                ),
            ));
        }
        let taxonomy: Self = serde_json::from_slice(file)
            .map_err(|e| InvalidRequest::new("taxonomy", format!("not a taxonomy file: {e}")))?;
        taxonomy.validate()?;
        Ok(taxonomy)
    }

    fn validate(&self) -> Result<(), InvalidRequest> {
        if !is_name(&self.name, b'-', 32) {
            return Err(InvalidRequest::new(
                "name",
                format!(
                    "{:?} is not a taxonomy name: a lowercase letter, then up to 31 lowercase \
                     letters, digits or '-' (^[a-z][a-z0-9-]{{0,31}}$)",
                    self.name
                ),
            ));
        }
        let n = self.departments.len();
        if !(MIN_DEPARTMENTS..=MAX_DEPARTMENTS).contains(&n) {
            return Err(InvalidRequest::new(
                "departments",
                format!("{n} departments; a taxonomy has {MIN_DEPARTMENTS} to {MAX_DEPARTMENTS}"),
            ));
        }
        for (i, department) in self.departments.iter().enumerate() {
            let field = |part: &str| format!("departments[{i}].{part}");
            if !is_name(&department.name, b'_', 63) {
                return Err(InvalidRequest::new(
                    &field("name"),
                    format!(
                        "{:?} is not a department name: a lowercase letter, then up to 62 \
                         lowercase letters, digits or '_' (^[a-z][a-z0-9_]{{0,62}}$)",
                        department.name
                    ),
                ));
            }
            if let Some(first) = self.departments[..i]
                .iter()
                .position(|d| d.name == department.name)
            {
                return Err(InvalidRequest::new(
                    &field("name"),
                    format!(
                        "department {:?} appears twice (departments[{first}] and [{i}])",
                        department.name
                    ),
                ));
            }
            if let Err(why) = one_line(&department.description, MAX_DESCRIPTION_CHARS) {
                return Err(InvalidRequest::new(
                    &field("description"),
                    format!("department {:?}: the description {why}", department.name),
                ));
            }
        }
        if let Err(why) = one_paragraph(&self.urgent, MAX_URGENT_CHARS) {
            return Err(InvalidRequest::new(
                "urgent",
                format!("the definition {why}"),
            ));
        }
        if !(0.0..=1.0).contains(&self.urgent_threshold) {
            return Err(InvalidRequest::new(
                "urgent_threshold",
                format!("{} is not in [0, 1]", self.urgent_threshold),
            ));
        }
        Ok(())
    }

    /// The form the version is the hash of: compact JSON, fields in a fixed order,
    /// departments in the file's order (the prompt lists them so), absent group ids left out.
    /// Whitespace and field order in the file do not make a new version.
    pub fn canonical(&self) -> String {
        serde_json::to_string(self).expect("a taxonomy serialises")
    }

    /// `<name>-<the first 12 hex digits of the SHA-256 of the canonical form>`: never a
    /// built-in policy's version (`policy-v1` has no 12 hex digits).
    pub fn version(&self) -> String {
        let digest = Sha256::digest(self.canonical().as_bytes());
        format!("{}-{}", self.name, &hex::encode(digest)[..12])
    }

    pub fn department_names(&self) -> impl Iterator<Item = &str> {
        self.departments.iter().map(|d| d.name.as_str())
    }
}

fn is_name(text: &str, separator: u8, max: usize) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= max
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == separator)
}

fn one_line(text: &str, max: usize) -> Result<(), String> {
    if text.contains(['\n', '\r']) {
        return Err("is more than one line".into());
    }
    one_paragraph(text, max)
}

fn one_paragraph(text: &str, max: usize) -> Result<(), String> {
    let chars = text.chars().count();
    if text.trim().is_empty() {
        Err("is empty".into())
    } else if chars > max {
        Err(format!("is {chars} characters; at most {max}"))
    } else if text.contains("\n\n") || text.chars().any(|c| c.is_control() && c != '\n') {
        Err("must be one paragraph of plain text".into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn file() -> serde_json::Value {
        json!({
            "name": "shop",
            "departments": [
                {"name": "returns", "description": "sending an order back, refunds for it"},
                {"name": "delivery", "description": "where an order is, late or lost parcels",
                 "zendesk_group_id": 360001},
            ],
            "urgent": "A parcel with medicine is lost, or money was taken twice.",
            "urgent_threshold": 0.5,
        })
    }

    fn parse(value: &serde_json::Value) -> Result<Taxonomy, InvalidRequest> {
        Taxonomy::parse(value.to_string().as_bytes())
    }

    #[test]
    fn the_same_content_is_the_same_version_and_any_edit_a_new_one() {
        let taxonomy = parse(&file()).unwrap();
        let version = taxonomy.version();
        assert!(version.starts_with("shop-") && version.len() == "shop-".len() + 12);
        let spaced = serde_json::to_string_pretty(&file()).unwrap();
        assert_eq!(
            Taxonomy::parse(spaced.as_bytes()).unwrap().version(),
            version
        );
        let mut edited = file();
        edited["departments"][0]["description"] = json!("sending an order back");
        assert_ne!(parse(&edited).unwrap().version(), version);
        let mut regrouped = file();
        regrouped["departments"][1]["zendesk_group_id"] = json!(360002);
        assert_ne!(parse(&regrouped).unwrap().version(), version);
    }

    #[test]
    fn a_bad_file_is_refused_naming_the_field_and_the_department() {
        type Edit = Box<dyn Fn(&mut serde_json::Value)>;
        let cases: Vec<(Edit, &str, &str)> = vec![
            (Box::new(|f| f["name"] = json!("Shop")), "name", "Shop"),
            (
                Box::new(|f| f["departments"][1]["name"] = json!("returns")),
                "departments[1].name",
                "appears twice",
            ),
            (
                Box::new(|f| f["departments"][0]["name"] = json!("Re turns")),
                "departments[0].name",
                "Re turns",
            ),
            (
                Box::new(|f| f["departments"][1]["description"] = json!("x".repeat(301))),
                "departments[1].description",
                "\"delivery\"",
            ),
            (
                Box::new(|f| f["departments"][0]["description"] = json!("two\nlines")),
                "departments[0].description",
                "one line",
            ),
            (
                Box::new(|f| f["departments"] = json!([f["departments"][0]])),
                "departments",
                "2 to 300",
            ),
            (
                Box::new(|f| f["urgent_threshold"] = json!(1.5)),
                "urgent_threshold",
                "1.5",
            ),
            (Box::new(|f| f["urgent"] = json!(" ")), "urgent", "empty"),
            (
                Box::new(|f| f["colour"] = json!("blue")),
                "taxonomy",
                "unknown field `colour`",
            ),
            (
                Box::new(|f| f["departments"][0]["queue"] = json!(1)),
                "taxonomy",
                "unknown field `queue`",
            ),
        ];
        for (edit, field, says) in cases {
            let mut bad = file();
            edit(&mut bad);
            let error = parse(&bad).unwrap_err();
            assert_eq!(error.field, field, "{error}");
            assert!(error.reason.contains(says), "{error}");
        }
        let many: Vec<_> = (0..301)
            .map(|i| json!({"name": format!("d{i}"), "description": "x"}))
            .collect();
        let mut big = file();
        big["departments"] = json!(many);
        assert!(parse(&big).unwrap_err().reason.contains("301 departments"));
    }
}
