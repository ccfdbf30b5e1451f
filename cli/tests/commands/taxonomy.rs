//! `triage taxonomy add|list|show`: a desk's taxonomy stored under its content's version.

use serde_json::Value;

use super::{json, refused, triage};

const BANK: &str = "examples/desks/bank/taxonomy.json";

/// `file` written under a temporary directory, its path as the CLI takes it.
fn written(dir: &tempfile::TempDir, name: &str, file: &Value) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(file).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

#[tokio::test]
async fn a_taxonomy_is_stored_by_its_content_and_listed_and_shown() {
    let url = testkit::fresh_database().await;
    let migrated = triage(&url, &["migrate"]).await;
    assert!(migrated.status.success(), "{migrated:?}");
    assert_eq!(
        json(&url, &["taxonomy", "list", "--json"]).await,
        Value::Array(vec![])
    );

    let added = json(&url, &["taxonomy", "add", BANK, "--json"]).await;
    let version = added["policy_version"].as_str().unwrap().to_string();
    let hex = version.strip_prefix("bank-").expect("<name>-<hex>");
    assert!(
        hex.len() == 12 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "{version}"
    );
    assert_eq!(
        (&added["departments"], &added["new"]),
        (&Value::from(77), &Value::Bool(true))
    );
    let again = json(&url, &["taxonomy", "add", BANK, "--json"]).await;
    assert_eq!(
        (&again["policy_version"], &again["new"]),
        (&added["policy_version"], &Value::Bool(false))
    );

    // The same content laid out otherwise is the same version; an edited definition is not.
    let dir = tempfile::tempdir().unwrap();
    let bank = format!("{}/../{BANK}", env!("CARGO_MANIFEST_DIR"));
    let mut file: Value = serde_json::from_slice(&std::fs::read(bank).unwrap()).unwrap();
    let compact = dir.path().join("compact.json");
    std::fs::write(&compact, file.to_string()).unwrap();
    let same = json(
        &url,
        &["taxonomy", "add", compact.to_str().unwrap(), "--json"],
    )
    .await;
    assert_eq!(same["policy_version"], version.as_str());
    file["departments"][0]["description"] = "Activating a card that has just arrived.".into();
    let edited = json(
        &url,
        &[
            "taxonomy",
            "add",
            &written(&dir, "edited.json", &file),
            "--json",
        ],
    )
    .await;
    assert_ne!(edited["policy_version"], version.as_str());

    let listed = json(&url, &["taxonomy", "list", "--json"]).await;
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(
        listed[0]["policy_version"], edited["policy_version"],
        "newest first"
    );
    let table = triage(&url, &["taxonomy", "list"]).await;
    assert!(String::from_utf8_lossy(&table.stdout).contains(&version));

    let shown = json(&url, &["taxonomy", "show", &version, "--json"]).await;
    assert_eq!(shown["policy_version"], version.as_str());
    assert_eq!(shown["name"], "bank");
    assert_eq!(shown["departments"].as_array().unwrap().len(), 77);
    assert_eq!(shown["departments"][0]["name"], "activate_my_card");
    let table = triage(&url, &["taxonomy", "show", &version]).await;
    assert!(String::from_utf8_lossy(&table.stdout).contains("activate_my_card"));

    let missing = refused(&url, &["taxonomy", "show", "bank-000000000000"]).await;
    assert!(missing.contains("is not stored"), "{missing}");
    let built_in = refused(&url, &["taxonomy", "show", "policy-v1"]).await;
    assert!(built_in.contains("built-in"), "{built_in}");
}

#[tokio::test]
async fn a_bad_taxonomy_file_is_refused_naming_the_field_and_nothing_is_stored() {
    let url = testkit::fresh_database().await;
    let migrated = triage(&url, &["migrate"]).await;
    assert!(migrated.status.success(), "{migrated:?}");
    let dir = tempfile::tempdir().unwrap();
    let department = |name: &str| serde_json::json!({"name": name, "description": "one line"});
    let file = |departments: Vec<Value>| {
        serde_json::json!({"name": "shop", "departments": departments,
                           "urgent": "Cannot pay.", "urgent_threshold": 0.5})
    };
    let mut unknown = file(vec![department("returns"), department("delivery")]);
    unknown["departments"][1]["owner"] = "ops".into();
    for (name, bad, names) in [
        (
            "twice.json",
            file(vec![department("returns"), department("returns")]),
            "departments[1].name",
        ),
        ("one.json", file(vec![department("returns")]), "departments"),
        (
            "spaced.json",
            file(vec![department("Re turns"), department("delivery")]),
            "departments[0].name",
        ),
        ("unknown.json", unknown, "owner"),
    ] {
        let reason = refused(&url, &["taxonomy", "add", &written(&dir, name, &bad)]).await;
        assert!(reason.contains(names), "{name}: {reason}");
    }
    let not_json = dir.path().join("not.json");
    std::fs::write(&not_json, "name: shop").unwrap();
    let reason = refused(&url, &["taxonomy", "add", not_json.to_str().unwrap()]).await;
    assert!(reason.contains("not a taxonomy file"), "{reason}");
    let reason = refused(&url, &["taxonomy", "add", "/no/such/taxonomy.json"]).await;
    assert!(reason.contains("/no/such/taxonomy.json"), "{reason}");
    assert_eq!(
        json(&url, &["taxonomy", "list", "--json"]).await,
        Value::Array(vec![])
    );
}
