//! A desk's own set as CSV, its columns named (`--columns`), with no split column: `eval`
//! and `train` read it, the split keeps every family (and near duplicate) in one split, and a
//! bad column is refused with nothing queued (docs/quality.md, "Your desk's own set").

use serde_json::{json, Value};
use triage::quality::set::{Columns, Format, LabelledSet};

use crate::helpers::spawn_app_with_fake;

use super::{fake_classifier, waiting, write_set, EvalSet};

const COLUMNS: &str = "text=body,subject=title,label=queue,urgent=p1,family=thread";

/// The JSONL set's rows as a help desk's export: other column names, no split, and every
/// body with a comma and a quote (CSV quoting); plus a copy of row 0 with a signature, not in
/// row 0's family, which must still land in row 0's split.
fn as_csv(set: &EvalSet) -> String {
    let quoted = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut csv = String::from("title,body,queue,p1,thread\n");
    let rows: Vec<Value> = set
        .text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for row in &rows {
        csv += &format!(
            "{},{},{},{},{}\n",
            quoted(row["subject"].as_str().unwrap()),
            quoted(row["message"].as_str().unwrap()),
            row["department"].as_str().unwrap(),
            if row["is_urgent"].as_bool().unwrap() {
                "yes"
            } else {
                "no"
            },
            row["family"].as_str().unwrap(),
        );
    }
    let first = &rows[0];
    csv += &format!(
        "{},{},{},{},\n",
        quoted(first["subject"].as_str().unwrap()),
        quoted(&format!(
            "{}\n\nThanks, \"Dana\"",
            first["message"].as_str().unwrap()
        )),
        first["department"].as_str().unwrap(),
        if first["is_urgent"].as_bool().unwrap() {
            "yes"
        } else {
            "no"
        },
    );
    csv
}

#[tokio::test]
async fn a_csv_set_by_its_columns_is_evaluated_and_trains_with_families_kept_in_one_split() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let csv = as_csv(&set);
    let path = set.path.with_file_name("desk.csv");
    std::fs::write(&path, &csv).unwrap();

    // A column the file does not have: refused, naming the field, nothing queued.
    let bad = json!({"op": "eval", "set": path, "columns": "text=body,label=team"});
    let error = waiting(&app, bad).await.unwrap_err().to_string();
    assert!(
        error.contains("columns") && error.contains("\"team\""),
        "{error}"
    );
    assert_eq!(app.count("SELECT count(*) FROM eval_request").await, 0);

    let columns: Columns = COLUMNS.parse().unwrap();
    let policy = triage::providers::Policy::load("policy-v1").unwrap();
    let parsed =
        LabelledSet::parse_as(csv.as_bytes(), &Format::Csv(columns.clone()), &policy).unwrap();
    assert_eq!(parsed.rows.len(), 61);
    let copy = &parsed.rows[60];
    assert_eq!(
        copy.family.as_deref(),
        Some("f0"),
        "the signed copy joins row 0's family"
    );
    for row in &parsed.rows {
        let first = parsed
            .rows
            .iter()
            .find(|r| r.family() == row.family())
            .unwrap();
        assert_eq!(row.split, first.split, "{}: one family, one split", row.id);
    }
    let test_rows = parsed
        .rows
        .iter()
        .filter(|r| r.split.as_str() == "test")
        .count();

    let payload = json!({"op": "eval", "set": path, "columns": COLUMNS, "split": "test",
                         "versions": ["triage-v5"]});
    let report = waiting(&app, payload).await.unwrap();
    assert_eq!(report["set"]["digest"], parsed.digest);
    assert_ne!(
        parsed.digest,
        triage::quality::set::digest(csv.as_bytes()),
        "the columns read are part of the set"
    );
    assert_eq!(report["runs"][0]["n"], test_rows as u64);
    let families = report["runs"][0]["families"].as_u64().unwrap();
    assert!(
        families < test_rows as u64,
        "{families} families of {test_rows} rows"
    );

    let dev_rows = 61 - test_rows;
    let train = json!({"op": "train", "from": [format!("set:{}", path.display())],
                       "columns": COLUMNS});
    let trained = waiting(&app, train).await.unwrap();
    assert_eq!(trained["examples"], dev_rows as u64, "the dev rows only");
    let stored: Value = app.row("SELECT sources FROM local_model").await.get(0);
    assert_eq!(stored[0]["columns"], columns.to_string());
}
