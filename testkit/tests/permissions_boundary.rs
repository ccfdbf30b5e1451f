//! Every IAM role the deployment creates or documents gets the `PermissionsBoundary`
//! parameter's boundary when it is set (issue "Round five", item 7): the SCPs that require one
//! refuse any role created without it. The template's (the functions'), the bastion's
//! (docs/deploy.md step 4) and the rotation application's (step 12, which offers no boundary
//! parameter of its own: its processed template is deployed with one).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use testkit::{
    markdown::sh_blocks,
    stdout_of,
    template::{globals, resources},
};

const BOUNDARY: &str = "arn:aws:iam::123456789012:policy/org-boundary";

/// As the functions have it: the parameter's policy when set, no property when empty.
const CONDITIONAL: &str =
    "PermissionsBoundary: !If [HasPermissionsBoundary, !Ref PermissionsBoundary, !Ref AWS::NoValue]";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap()
}

/// The `sh` block of a doc holding `needle`.
fn block_with(doc: &str, needle: &str) -> String {
    sh_blocks(&read(doc))
        .into_iter()
        .map(|(_, block)| block)
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("{doc}: no sh block with {needle}"))
}

/// A block's commands, continuation lines joined.
fn commands(block: &str) -> Vec<String> {
    block
        .replace("\\\n", " ")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_role_the_template_creates_has_the_boundary_when_it_is_set() {
    let template = read("template.yaml");
    assert!(template
        .contains(r#"HasPermissionsBoundary: !Not [!Equals [!Ref PermissionsBoundary, ""]]"#));
    // SAM makes each function's role, with the boundary `Globals` gives every function.
    let function_globals: Vec<&str> = globals(&template)
        .lines()
        .skip_while(|line| *line != "  Function:")
        .skip(1)
        .take_while(|line| line.starts_with("   ") || line.trim().is_empty())
        .collect();
    assert!(
        function_globals.contains(&format!("    {CONDITIONAL}").as_str()),
        "Globals.Function: {function_globals:?}"
    );
    let mut functions = 0;
    for (name, block) in resources(&template) {
        let kind = block
            .lines()
            .find_map(|line| line.strip_prefix("    Type: "))
            .unwrap_or_else(|| panic!("{name} has no Type"));
        let own = block
            .lines()
            .find(|line| line.trim_start().starts_with("PermissionsBoundary:"));
        match kind {
            "AWS::Serverless::Function" => {
                functions += 1;
                // Its own value would replace the global one.
                assert!(own.is_none_or(|line| line.trim() == CONDITIONAL), "{name}");
            }
            "AWS::IAM::Role" | "AWS::Serverless::StateMachine" => {
                assert_eq!(own.map(str::trim), Some(CONDITIONAL), "{name}");
            }
            // A nested stack's roles are its own: out of the parameter's reach.
            "AWS::Serverless::Application" | "AWS::CloudFormation::Stack" => {
                panic!("{name}: a nested stack's roles get no boundary from here")
            }
            _ => {}
        }
    }
    assert!(functions >= 7, "only {functions} functions read");
}

#[test]
fn every_documented_role_is_created_with_the_boundary() {
    let mut created = 0;
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (line, block) in sh_blocks(&text) {
            for command in commands(&block) {
                if command.contains("aws iam create-role ") {
                    created += 1;
                    assert!(
                        command.contains(r#"${BOUNDARY:+--permissions-boundary "$BOUNDARY"}"#),
                        "{}:{line}: {command}",
                        path.display()
                    );
                }
            }
        }
    }
    assert!(created >= 1, "no documented aws iam create-role");
}

/// The bastion's boundary is the env's `PermissionsBoundary` in samconfig.toml: the block's own
/// lookup, run on samconfigs that name one (last in the list or not) and on the repository's.
#[test]
fn the_bastion_role_gets_the_boundary_samconfig_toml_names() {
    let block = block_with(
        "docs/deploy.md",
        r#"aws iam create-role --role-name "triage-$ENV-bastion""#,
    );
    let lookup = block
        .lines()
        .find(|line| line.starts_with("BOUNDARY="))
        .expect("the bastion block sets BOUNDARY");
    let dir = std::env::temp_dir().join(format!("boundary-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let named = format!(
        "[dev.deploy.parameters]\nparameter_overrides = [\n  \"Stage=dev\",\n]\n\n\
         [prod.deploy.parameters]\nparameter_overrides = [\n  \"Stage=prod\",\n  \
         \"PermissionsBoundary={BOUNDARY}\",  # the SCP's\n  \"Provider=openai\"\n]\n\n\
         [staging.deploy.parameters]\nparameter_overrides = [\n  \"PermissionsBoundary={BOUNDARY}-2\"\n]\n"
    );
    for (samconfig, env, expected) in [
        (named.clone(), "prod", BOUNDARY.to_string()),
        (named.clone(), "staging", format!("{BOUNDARY}-2")),
        (named, "dev", String::new()),
        (read("samconfig.toml"), "prod", String::new()),
    ] {
        std::fs::write(dir.join("samconfig.toml"), samconfig).unwrap();
        let script = format!("ENV={env}\n{lookup}\nprintf %s \"$BOUNDARY\"");
        assert_eq!(stdout_of("bash", &["-c", &script], &dir), expected, "{env}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With a boundary the rotation application's change set is replaced by its processed template
/// with the boundary on every role: the block's `jq` program, run on a template of that shape.
#[test]
fn the_rotation_application_is_deployed_with_the_boundary_on_its_roles() {
    let block = block_with("docs/deploy.md", "create-cloud-formation-change-set");
    for step in [
        "BOUNDARY=$(stack_param PermissionsBoundary)",
        r#"if [ -n "$BOUNDARY" ]; then"#,
        "--template-stage Processed",
        ">rotation-template.json",
        "--template-body file://rotation-template.json",
    ] {
        assert!(block.contains(step), "the rotation block lacks {step}");
    }
    let start = block.find("'(.Resources").expect("the jq program") + 1;
    let program = &block[start..start + block[start..].find('\'').unwrap()];
    let parameters = json!([
        {"ParameterKey": "functionName", "ParameterValue": "triage-prod-db-rotation"},
        {"ParameterKey": "vpcSubnetIds", "ParameterValue": "subnet-1,subnet-2"},
    ]);
    // What SAM makes of the application's function: its role, the function, the permission.
    let processed = json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {
            "functionName": {"Type": "String"},
            "vpcSubnetIds": {"Type": "String", "Default": ""},
            "endpoint": {"Type": "String", "Default": "https://secretsmanager.eu-west-1.amazonaws.com"},
        },
        "Resources": {
            "SecretsManagerRDSPostgreSQLRotationSingleUserRole": {
                "Type": "AWS::IAM::Role",
                "Properties": {"AssumeRolePolicyDocument": {}, "ManagedPolicyArns": []},
            },
            "SecretsManagerRDSPostgreSQLRotationSingleUser": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Role": {"Fn::GetAtt": ["SecretsManagerRDSPostgreSQLRotationSingleUserRole", "Arn"]}},
            },
            "LambdaPermission": {"Type": "AWS::Lambda::Permission", "Properties": {}},
        },
    });
    let dir = std::env::temp_dir().join(format!("rotation-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("processed.json"), processed.to_string()).unwrap();
    let out = stdout_of(
        "jq",
        &[
            "--arg",
            "boundary",
            BOUNDARY,
            "--argjson",
            "parameters",
            &parameters.to_string(),
            program,
            "processed.json",
        ],
        &dir,
    );
    let _ = std::fs::remove_dir_all(&dir);
    let out: Value = serde_json::from_str(&out).unwrap();
    let mut expected = processed;
    expected["Resources"]["SecretsManagerRDSPostgreSQLRotationSingleUserRole"]["Properties"]
        ["PermissionsBoundary"] = BOUNDARY.into();
    expected["Parameters"]["functionName"]["Default"] = "triage-prod-db-rotation".into();
    expected["Parameters"]["vpcSubnetIds"]["Default"] = "subnet-1,subnet-2".into();
    assert_eq!(out, expected);
}
