//! Least privilege for the Zendesk secrets (issue 51, item 9), read from the template's text.
//! IAM cannot grant one field of a secret, so the signing secret may live in a secret of its
//! own (`ZendeskSigningSecretArn`): the deliverer, which writes back with the token, is never
//! granted it (it could forge events); with it set, the API function, which faces the
//! internet and only verifies events, is granted it and not the token's secret. Left empty,
//! the API reads the older combined secret, token included (docs/zendesk.md says so).

use std::path::Path;

use testkit::template::resources;

fn template() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    std::fs::read_to_string(path).unwrap()
}

/// The lines of a block's `secretsmanager:GetSecretValue` statements after their `Action`:
/// the `Resource` and its items.
fn secret_grants(block: &str) -> Vec<String> {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut grants = Vec::new();
    let mut lines = block.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "Action: secretsmanager:GetSecretValue" {
            continue;
        }
        let depth = indent(line);
        for line in lines.by_ref() {
            if indent(line) < depth {
                break;
            }
            grants.push(line.trim().to_string());
        }
    }
    grants
}

/// `lines` naming `!Ref {parameter}`.
fn naming<'a>(lines: impl IntoIterator<Item = &'a str>, parameter: &str) -> Vec<&'a str> {
    let reference = format!("!Ref {parameter}");
    lines
        .into_iter()
        .filter(|line| {
            line.match_indices(&reference).any(|(i, _)| {
                let next = line[i + reference.len()..].chars().next();
                !next.is_some_and(|c| c.is_ascii_alphanumeric())
            })
        })
        .collect()
}

#[test]
fn only_the_api_reads_the_signing_secret_and_split_it_cannot_read_the_token() {
    let template = template();
    let condition = |name: &str| {
        template
            .lines()
            .find_map(|line| line.trim().strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("condition {name}"))
            .to_string()
    };
    // Split: the signing secret's ARN is set; combined: it is empty.
    let split = condition("SplitZendeskSecrets");
    let combined = condition("CombinedZendeskSecret");
    assert!(
        split.contains(r#"!Not [!Equals [!Ref ZendeskSigningSecretArn, ""]]"#),
        "{split}"
    );
    assert!(
        combined.contains(r#"!Equals [!Ref ZendeskSigningSecretArn, ""]"#)
            && !combined.contains("!Not"),
        "{combined}"
    );

    let blocks = resources(&template);
    for (name, block) in &blocks {
        if name != "ApiFunction" {
            assert_eq!(
                naming(block.lines(), "ZendeskSigningSecretArn"),
                Vec::<&str>::new(),
                "{name} must not be given the signing secret"
            );
        }
    }
    let deliverer = secret_grants(&blocks["DelivererFunction"]);
    assert!(
        !naming(deliverer.iter().map(String::as_str), "ZendeskSecretArn").is_empty(),
        "the deliverer reads the token: {deliverer:?}"
    );

    let api = &blocks["ApiFunction"];
    let grants = secret_grants(api);
    let grants: Vec<&str> = grants.iter().map(String::as_str).collect();
    for (parameter, variable, only_when) in [
        (
            "ZendeskSigningSecretArn",
            "TRIAGE_ZENDESK_SIGNING_SECRET_ARN",
            "SplitZendeskSecrets",
        ),
        (
            "ZendeskSecretArn",
            "TRIAGE_ZENDESK_SECRET_ARN",
            "CombinedZendeskSecret",
        ),
    ] {
        let granted = naming(grants.iter().copied(), parameter);
        let told: Vec<&str> = naming(api.lines(), parameter)
            .into_iter()
            .filter(|line| line.trim().starts_with(&format!("{variable}:")))
            .collect();
        assert!(!granted.is_empty(), "the API is granted {parameter}");
        assert_eq!(told.len(), 1, "the API is told {variable}");
        let under = format!("!If [{only_when}, !Ref {parameter}, !Ref AWS::NoValue]");
        for line in granted.iter().chain(&told) {
            assert!(line.contains(&under), "{line}: only {under}");
        }
    }
}
