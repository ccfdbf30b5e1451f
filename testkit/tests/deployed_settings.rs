//! What a deployment is told by its template parameters and what the docs hand an operator
//! (issue "Round four", items 8 and 9): the promote gate's set is a parameter, the console
//! run against the deployed database gets every setting that decides what it shows, and the
//! ops function's memory, which its refusals name, is a parameter too; a failed scheduled retrain
//! is not retried by Lambda (issue "Round five", item 6).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap()
}

/// The template's `Globals` section: what every function's environment holds.
fn globals(template: &str) -> &str {
    template
        .split("\nGlobals:\n")
        .nth(1)
        .and_then(|rest| rest.split("\nResources:\n").next())
        .expect("Globals")
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
