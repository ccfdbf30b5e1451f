use std::collections::HashSet;

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
    let set = LabelledSet::read(Path::new(path), &Format::Jsonl, &policy()).unwrap();
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

use split::split_of;

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
        families(Split::Dev) >= 110,
        "{} families in dev",
        families(Split::Dev)
    );
    let (dev, test) = (urgent_share(Split::Dev), urgent_share(Split::Test));
    assert!(
        (dev - test).abs() <= 0.05,
        "urgent share: dev {dev:.3}, test {test:.3}"
    );
}

/// The shipped set with its splits and families taken away, as a desk's set comes: the
/// copies assemble.py made of a ticket (a case or spacing duplicate, a follow-up quoting
/// it, a signature added, a forward) are found near duplicates of it, all or all but a
/// few; a ticket under a pasted log a hundred times its size is not (MinHash cannot see
/// 1% of a row), and docs/quality.md says so.
#[test]
fn a_set_without_splits_keeps_each_tickets_copies_with_it() {
    let bare: String = std::str::from_utf8(SHIPPED)
        .unwrap()
        .lines()
        .map(|line| {
            let mut row: serde_json::Value = serde_json::from_str(line).unwrap();
            let fields = row.as_object_mut().unwrap();
            fields.remove("split");
            fields.remove("family");
            format!("{row}\n")
        })
        .collect();
    let set = LabelledSet::parse(bare.as_bytes(), &policy()).unwrap();
    let by_id: std::collections::HashMap<&str, &Row> =
        set.rows.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut found: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for row in &set.rows {
        let Some((base, kind)) = row.id.rsplit_once('-') else {
            continue;
        };
        let Some(base) = by_id
            .get(base)
            .filter(|_| ["dup", "sig", "fwd", "re", "log"].contains(&kind))
        else {
            continue;
        };
        let counted = found.entry(kind).or_default();
        counted.1 += 1;
        if (base.family(), base.split) == (row.family(), row.split) {
            counted.0 += 1;
        }
    }
    println!("copies found with their ticket: {found:?}");
    for (kind, (with, of)) in found {
        let least = match kind {
            "dup" | "re" => of,
            "log" => 0,
            _ => of * 95 / 100,
        };
        assert!(
            with >= least,
            "{kind}: {with} of {of} copies with their ticket"
        );
    }
}

/// `triage import` appends a ticket exported again (solved, then closed): the newest row of an
/// id is the one kept, in its place among the rows kept.
#[test]
fn an_id_given_again_keeps_its_newest_row() {
    let newer = ROW.replace("billing", "technical");
    let other = ROW.replace("\"a\"", "\"b\"");
    let text = format!("{ROW}\n{other}\n{newer}");
    let set = LabelledSet::parse(text.as_bytes(), &policy()).unwrap();
    let rows: Vec<(&str, &str)> = set
        .rows
        .iter()
        .map(|r| (r.id.as_str(), r.department.as_str()))
        .collect();
    assert_eq!(rows, [("b", "billing"), ("a", "technical")]);
}

#[test]
fn bad_rows_are_refused_by_line_number() {
    let cases = [
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
