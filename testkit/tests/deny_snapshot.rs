//! The advisory snapshot cannot age silently (issue "Round four", item 6): `scripts/deny`
//! reports it past 30 days and fails past its stated age (180), naming the command that
//! refreshes it, and deny.toml holds every
//! unmaintained crate to account, transitive ones included, each accepted one with its reason.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The snapshot's date, from its README's Source line, as `YYYY-MM-DD`.
fn snapshot_day() -> chrono::NaiveDate {
    let readme = std::fs::read_to_string(root().join("deny/advisory-db/README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("Source: RustSec advisory-db commit "))
        .expect("a Source line");
    let date = line.split(" of ").nth(1).unwrap().trim_end_matches('.');
    chrono::DateTime::parse_from_rfc3339(date)
        .unwrap()
        .with_timezone(&chrono::Utc)
        .date_naive()
}

/// `scripts/deny --snapshot-age` on `today`: its exit status and what it said.
fn age_check(today: chrono::NaiveDate) -> (bool, String) {
    let out = Command::new(root().join("scripts/deny"))
        .arg("--snapshot-age")
        .env("DENY_TODAY", today.to_string())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_snapshot_past_thirty_days_is_reported_and_past_180_fails_the_check_each_with_the_command_that_refreshes_it(
) {
    let taken = snapshot_day();
    let (ok, said) = age_check(taken + chrono::Days::new(29));
    assert!(ok, "29 days is within the age: {said}");
    assert!(!said.contains("WARNING"), "{said}");
    let (ok, said) = age_check(taken + chrono::Days::new(31));
    assert!(ok, "31 days is due for a refresh, not yet failing: {said}");
    assert!(
        said.contains("WARNING") && said.contains("31 days old"),
        "{said}"
    );
    assert!(said.contains("scripts/deny --refresh-snapshot"), "{said}");
    let (ok, said) = age_check(taken + chrono::Days::new(180));
    assert!(ok, "180 days is the most allowed: {said}");
    let (ok, said) = age_check(taken + chrono::Days::new(181));
    assert!(!ok, "181 days is past it");
    assert!(said.contains("181 days old"), "{said}");
    assert!(said.contains("scripts/deny --refresh-snapshot"), "{said}");
}

#[test]
fn every_unmaintained_crate_counts_and_each_ignore_says_why() {
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(root().join("deny.toml")).unwrap()).unwrap();
    let advisories = &config["advisories"];
    assert_eq!(advisories["unmaintained"].as_str(), Some("all"));
    for entry in advisories["ignore"].as_array().unwrap() {
        let reason = entry.get("reason").and_then(|r| r.as_str());
        assert!(
            entry.get("id").is_some() && reason.is_some_and(|r| r.contains("reviewed")),
            "an ignore names its advisory and why, with its review date: {entry}"
        );
    }
}
