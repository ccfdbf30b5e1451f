//! What a deployment is told by its template parameters and what the docs hand an operator
//! (issue "Round four", items 8 and 9): the promote gate's set is a parameter, the console
//! run against the deployed database gets every setting that decides what it shows, and the
//! ops function's memory, which its refusals name, is a parameter too; a failed scheduled retrain
//! is not retried by Lambda (issue "Round five", item 6), and the docs' scopes, upgrade range,
//! `RetrainSchedule` quoting, taxonomy payload and set digest hold (item 8).

use std::path::{Path, PathBuf};

use serde_json::Value;
use testkit::{markdown::sh_blocks, stdout_of, template::globals};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap()
}

/// Whether `variable` is set in `Globals` from the parameter `parameter` (directly, or when
/// given).
fn set_from(globals: &str, variable: &str, parameter: &str) -> bool {
    globals.lines().any(|line| {
        let line = line.trim();
        line.starts_with(&format!("{variable}: "))
            && (line.ends_with(&format!("!Ref {parameter}"))
                || line.contains(&format!("!Ref {parameter}, !Ref AWS::NoValue]")))
    })
}

#[test]
fn the_promote_gate_judges_on_the_set_the_eval_set_parameter_names() {
    let template = read("template.yaml");
    let parameter = template
        .split("\n  EvalSet:\n")
        .nth(1)
        .expect("an EvalSet parameter");
    let pattern = parameter
        .lines()
        .find_map(|l| l.trim().strip_prefix("AllowedPattern: "))
        .expect("EvalSet has a pattern");
    // A digest, the desk's feedback, the shipped set; never a path the functions do not have.
    for form in ["^$", "^shipped$", "sha256:[0-9a-fA-F]{64}", "feedback(:"] {
        assert!(pattern.contains(form), "{pattern} lacks {form}");
    }
    assert!(!pattern.contains('/'), "{pattern}");
    assert!(set_from(globals(&template), "TRIAGE_EVAL_SET", "EvalSet"));
    // The docs name the parameter where they name the variable.
    for doc in ["docs/quality.md", "docs/runbook.md"] {
        assert!(read(doc).contains("`EvalSet`"), "{doc}");
    }
}

#[test]
fn the_console_in_aws_gets_every_setting_that_decides_what_it_shows() {
    let runbook = read("docs/runbook.md");
    let section = runbook
        .split("\n## Operator console in AWS\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the runbook's console section");
    // The block that starts it (the tunnel has a block of its own, for a second shell).
    let block = section
        .split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .find(|block| block.contains("triage serve"))
        .expect("the sh block that starts the console");
    let template = read("template.yaml");
    let globals = globals(&template);
    for (variable, parameter) in [
        ("TRIAGE_PROVIDER", "Provider"),
        ("TRIAGE_MODEL", "Model"),
        ("TRIAGE_EFFORT", "Effort"),
        ("TRIAGE_PROMPT_VERSION", "PromptVersion"),
        ("TRIAGE_POLICY_VERSION", "PolicyVersion"),
        ("TRIAGE_BULK_TIER", "BulkTier"),
        ("TRIAGE_EVAL_SET", "EvalSet"),
    ] {
        assert!(
            set_from(globals, variable, parameter),
            "the functions get {variable} from {parameter}"
        );
        assert!(
            block.contains(&format!("{variable}=$(stack_param {parameter})")),
            "the console block sets {variable} as the functions have it:\n{block}"
        );
        assert!(
            block
                .lines()
                .any(|l| l.contains("export") && l.contains(variable)),
            "the console block exports {variable}"
        );
    }
}

/// The ops function fits a training to its memory and refuses an eval larger than it, telling
/// the operator to raise `OpsMemorySize` (operations/fits.rs, docs/runbook.md): a parameter the
/// template has, that sets the function's memory, with the default both assume when Lambda
/// does not say.
#[test]
fn the_ops_functions_memory_is_the_parameter_its_refusals_name() {
    let template = read("template.yaml");
    let parameter = template
        .split("\n  OpsMemorySize:\n")
        .nth(1)
        .expect("an OpsMemorySize parameter");
    let default = parameter
        .lines()
        .find_map(|l| l.trim().strip_prefix("Default: "))
        .expect("OpsMemorySize has a default");
    let function = template
        .split("\n  OpsFunction:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n  OpsLogGroup:\n").next())
        .expect("OpsFunction");
    assert!(
        function.contains("MemorySize: !Ref OpsMemorySize"),
        "{function}"
    );
    let fits = read("shared/src/operations/fits.rs");
    assert!(fits.contains("OpsMemorySize"));
    assert!(
        fits.contains(&format!("DEFAULT_LAMBDA_MEMORY_MB: u32 = {default};")),
        "fits.rs assumes the parameter's default, {default}"
    );
    assert!(read("docs/runbook.md").contains("`OpsMemorySize`"));
}

/// The cascade's audit (issue "It grades itself"): every function gets the share and the
/// window from their parameters, and the suspension has an alarm on the sweeper's metric.
#[test]
fn the_audit_is_a_parameter_and_a_suspended_cascade_alarms() {
    let template = read("template.yaml");
    let globals = globals(&template);
    assert!(set_from(globals, "TRIAGE_AUDIT_SHARE", "AuditShare"));
    assert!(set_from(
        globals,
        "TRIAGE_AUDIT_WINDOW_DAYS",
        "AuditWindowDays"
    ));
    let alarm = template
        .split("\n  CascadeSuspendedAlarm:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n  # ---").next())
        .expect("a CascadeSuspendedAlarm");
    for line in [
        "MetricName: cascade.suspended",
        "Value: sweeper",
        "Threshold: 1",
    ] {
        assert!(alarm.contains(line), "the alarm lacks {line}");
    }
    assert!(read("docs/runbook.md").contains("The cascade suspended itself"));
}

/// A scheduled retrain that fails is one run, not three (issue "Round five", item 6): the
/// schedule invokes the ops function asynchronously, and Lambda's default two retries would
/// each be audited as a run that did not switch, so `RetrainFailingAlarm` (3 in a row) would
/// fire on the first failure.
#[test]
fn a_failed_scheduled_retrain_is_not_retried_into_the_failing_alarm() {
    let template = read("template.yaml");
    let function = template
        .split("\n  OpsFunction:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n  OpsLogGroup:\n").next())
        .expect("OpsFunction");
    let properties = function
        .split("\n    Properties:\n")
        .nth(1)
        .expect("Properties");
    let invoke_config = properties
        .split("\n      EventInvokeConfig:\n")
        .nth(1)
        .expect("OpsFunction sets its EventInvokeConfig");
    let retries = invoke_config
        .lines()
        .take_while(|line| line.starts_with("        "))
        .find_map(|line| line.trim().strip_prefix("MaximumRetryAttempts: "))
        .expect("MaximumRetryAttempts");
    assert_eq!(retries, "0");
    let alarm = template
        .split("\n  RetrainFailingAlarm:\n")
        .nth(1)
        .expect("RetrainFailingAlarm");
    assert!(
        alarm.contains("Threshold: 3"),
        "the alarm counts runs in a row"
    );
}

/// The number words docs use for a count of scopes.
const COUNTS: [&str; 10] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
];

/// Every JWT scope the API checks (`"triage/…"` in shared/src/http) is in the Cognito list of
/// docs/delivery.md and the route scopes of docs/runbook.md, each counted right (issue "Round
/// five", item 8: "six scopes" left out `triage/label`).
#[test]
fn the_docs_list_every_scope_the_api_checks_and_count_them_right() {
    let mut scopes = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(root().join("shared/src/http")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let code = std::fs::read_to_string(&path).unwrap();
            for piece in code.split("\"triage/").skip(1) {
                scopes.insert(format!("triage/{}", piece.split('"').next().unwrap()));
            }
        }
    }
    assert!(scopes.contains("triage/label"), "{scopes:?}");
    let count = COUNTS[scopes.len()];
    let delivery = read("docs/delivery.md");
    let cognito = delivery
        .split(&format!("the {count} scopes ("))
        .nth(1)
        .and_then(|rest| rest.split("), and an app client").next())
        .unwrap_or_else(|| panic!("docs/delivery.md: \"the {count} scopes (…)\""));
    let runbook = read("docs/runbook.md");
    let route_scopes = runbook
        .split("### Route scopes (JWT)")
        .nth(1)
        .and_then(|rest| rest.split("API Gateway refuses").next())
        .expect("runbook's Route scopes");
    let capitalised = format!("{}{}", count[..1].to_uppercase(), &count[1..]);
    assert!(
        route_scopes.contains(&format!("{capitalised} scopes in all")),
        "{route_scopes}"
    );
    for scope in &scopes {
        assert!(
            cognito.contains(&format!("`{scope}`")),
            "delivery.md: {scope}"
        );
        assert!(
            route_scopes.contains(&format!("`{scope}`")),
            "runbook.md: {scope}"
        );
    }
}

/// docs/deploy.md's upgrade test covers the migrations there are: it names the newest one
/// (issue "Round five", item 8: it said V27-V29 while they reached V38).
#[test]
fn the_upgrade_test_docs_name_the_newest_migration() {
    let newest = std::fs::read_dir(root().join("migrations"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_prefix('V')?
                .split("__")
                .next()?
                .parse::<u32>()
                .ok()
        })
        .max()
        .unwrap();
    let deploy = read("docs/deploy.md");
    let upgrade = deploy
        .split("For this\nrelease `scripts/test` runs it")
        .nth(1)
        .and_then(|rest| rest.split("CI runs it on every change").next())
        .expect("deploy.md's upgrade test paragraph");
    assert!(upgrade.contains(&format!("V{newest}")), "{upgrade}");
}

/// `RetrainSchedule`'s value has a space, so samconfig.toml needs it in escaped quotes, which
/// the docs show (issue "Round five", item 8); the line they show is a TOML string that SAM
/// reads as one parameter with the quoted value.
#[test]
fn the_docs_show_retrain_schedule_in_the_escaped_quotes_samconfig_needs() {
    let shown = r#""RetrainSchedule=\"rate(1 day)\"""#;
    for doc in ["docs/cascade.md", "docs/runbook.md"] {
        assert!(read(doc).contains(shown), "{doc} shows {shown}");
    }
    let parsed: toml::Value = toml::from_str(&format!("v = {shown}")).unwrap();
    assert_eq!(
        parsed["v"].as_str(),
        Some("RetrainSchedule=\"rate(1 day)\"")
    );
}

/// The runbook's `jq` line wraps a taxonomy file in the ops Lambda's `taxonomy` payload
/// (issue "Round five", item 8): run on the bank's file, it is `add` of the file itself, in
/// the shape of the runbook's own example payload, all 77 departments kept.
#[test]
fn the_runbooks_jq_wraps_the_bank_taxonomy_in_the_taxonomy_payload() {
    let runbook = read("docs/runbook.md");
    let line = sh_blocks(&runbook)
        .into_iter()
        .flat_map(|(_, block)| block.lines().map(str::to_string).collect::<Vec<_>>())
        .find(|line| line.contains("jq -c '{op: \"taxonomy\""))
        .expect("the runbook's taxonomy jq line");
    let program = line.split('\'').nth(1).unwrap();
    let file = "examples/desks/bank/taxonomy.json";
    assert!(line.contains(&format!("' {file})")), "{line}");
    let payload: Value =
        serde_json::from_str(&stdout_of("jq", &["-c", program, file], &root())).unwrap();
    let taxonomy: Value = serde_json::from_str(&read(file)).unwrap();
    assert_eq!(taxonomy["departments"].as_array().unwrap().len(), 77);
    // The runbook's own `add` payload (which shared/tests/pipeline/operations/lambda.rs
    // parses as the ops Lambda does) with the bank's file in it.
    let mut example: Value = serde_json::from_str(
        runbook
            .lines()
            .find(|l| l.starts_with(r#"{"op": "taxonomy", "action": {"add""#))
            .expect("the runbook's taxonomy add payload"),
    )
    .unwrap();
    example["action"]["add"]["file"] = taxonomy;
    assert_eq!(payload, example);
}

/// The digest docs/zendesk.md computes for a set it uploads is the one the code names a set by
/// (issue "Round five", item 8): its line, run on the shipped set, gives the shipped digest.
#[test]
fn the_digest_zendesk_md_computes_is_the_sets() {
    let line = sh_blocks(&read("docs/zendesk.md"))
        .into_iter()
        .flat_map(|(_, block)| block.lines().map(str::to_string).collect::<Vec<_>>())
        .find(|line| line.starts_with("DIGEST=") && line.contains("desk.jsonl"))
        .expect("docs/zendesk.md's digest line");
    let shipped = read("shared/src/quality/set.rs")
        .lines()
        .find_map(|l| l.strip_prefix("pub const SHIPPED_DIGEST: &str = \""))
        .and_then(|rest| rest.strip_suffix("\";"))
        .expect("SHIPPED_DIGEST")
        .to_string();
    let dir = std::env::temp_dir().join(format!("digest-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(root().join("evals/tickets.jsonl"), dir.join("desk.jsonl")).unwrap();
    let script = format!("{line}\nprintf %s \"$DIGEST\"");
    let digest = stdout_of("bash", &["-c", &script], &dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(digest, format!("sha256:{shipped}"));
}
