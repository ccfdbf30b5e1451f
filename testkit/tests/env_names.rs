//! Two envs in one account and region (issue 28, item 5): every name docs/deploy.md and
//! docs/runbook.md give what they create, and every name in samconfig.toml's envs, derives from
//! the env, so `dev`'s and `prod`'s never meet: neither env's setup overwrites the other's
//! resources, and neither's teardown deletes the other's.
//!
//! The docs' `sh` blocks run as a reader pastes them, once with `ENV=dev` and once with
//! `ENV=prod` (the line `ENV=prod` at the top of each document, rewritten), in a bash where `aws`
//! is a function recording its arguments and every other command but `sed` is "not found" and
//! answered with a placeholder (docs_commands.rs checks the same commands against the AWS CLI).
//! What a command creates is read from its arguments (`CREATED`), as the shell passes them.

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use testkit::markdown::sh_blocks;

const ENVS: [&str; 2] = ["dev", "prod"];
const DOCS: [&str; 2] = ["docs/deploy.md", "docs/runbook.md"];

/// (service, operation, option): the option names what the command creates.
const CREATED: &[(&str, &str, &str)] = &[
    ("ec2", "create-security-group", "--group-name"),
    ("rds", "create-db-subnet-group", "--db-subnet-group-name"),
    ("rds", "create-db-instance", "--db-instance-identifier"),
    (
        "rds",
        "delete-db-instance",
        "--final-db-snapshot-identifier",
    ),
    ("iam", "create-role", "--role-name"),
    ("iam", "create-instance-profile", "--instance-profile-name"),
    ("secretsmanager", "create-secret", "--name"),
    ("sns", "create-topic", "--name"),
    (
        "serverlessrepo",
        "create-cloud-formation-change-set",
        "--stack-name",
    ),
];

/// Shorthand `Key=Value` pairs inside arguments that name what is created or tag it:
/// the rotation function's name, the bastion's Name tag, the env tag.
const SHORTHAND: &[&str] = &[
    "Name=functionName,Value=",
    "Key=Name,Value=",
    "Key=triage:env,Value=",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What one document's blocks do for `env`: every `aws` command's arguments, and `$STACK` at
/// the end.
struct Run {
    commands: Vec<Vec<String>>,
    stack: String,
}

fn run_doc(doc: &str, env: &str, work: &Path) -> Run {
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let mut script = String::from(
        "command_not_found_handle() { echo PLACEHOLDER; return 0; }\n\
         aws() { printf '%s\\037' \"$@\" >>\"$DOCS_AWS_LOG\"; printf '\\036' >>\"$DOCS_AWS_LOG\"; echo PLACEHOLDER; }\n",
    );
    for (_, block) in sh_blocks(&text) {
        for line in block.lines() {
            match line.strip_prefix("ENV=prod") {
                Some(rest) if rest.is_empty() || rest.starts_with(' ') => {
                    script.push_str(&format!("ENV={env}{rest}\n"))
                }
                _ => {
                    script.push_str(line);
                    script.push('\n');
                }
            }
        }
    }
    script.push_str("printf '%s' \"$STACK\" >\"$DOCS_STACK\"\n");
    let dir = work.join(format!("{}-{env}", doc.replace('/', "-")));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    // The one real tool: the blocks read the stack's name from samconfig.toml with it.
    let sed = ["/usr/bin/sed", "/bin/sed"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("sed");
    #[cfg(unix)]
    std::os::unix::fs::symlink(sed, dir.join("bin/sed")).unwrap();
    std::fs::copy(root().join("samconfig.toml"), dir.join("samconfig.toml")).unwrap();
    let log = dir.join("aws.log");
    let stack = dir.join("stack");
    let mut child = Command::new("/bin/bash")
        .arg("-c")
        .arg(script)
        .current_dir(&dir)
        .env_clear()
        .env("PATH", dir.join("bin"))
        .env("HOME", &dir)
        .env("DOCS_AWS_LOG", &log)
        .env("DOCS_STACK", &stack)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // What `read` gets; the shell may stop reading before the end.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all("INPUT\n".repeat(200).as_bytes());
    child.wait().unwrap();
    let commands = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .split('\u{1e}')
        .filter(|c| !c.is_empty())
        .map(|c| {
            c.split('\u{1f}')
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect();
    Run {
        commands,
        stack: std::fs::read_to_string(&stack).unwrap_or_default(),
    }
}

/// The names `commands` create, each with what it is (for the messages); a name may come
/// twice (the instance and its subnet group are both `triage-$ENV`).
fn created(commands: &[Vec<String>]) -> Vec<(String, String)> {
    let mut names = Vec::new();
    for args in commands {
        for (service, operation, option) in CREATED {
            if args.len() > 2 && args[0] == *service && args[1] == *operation {
                if let Some(at) = args.iter().position(|a| a == option) {
                    let name = args.get(at + 1).cloned().unwrap_or_default();
                    names.push((name, format!("{service} {operation} {option}")));
                }
            }
        }
        for arg in args {
            for key in SHORTHAND {
                for (at, _) in arg.match_indices(key) {
                    let value: String = arg[at + key.len()..]
                        .chars()
                        .take_while(|c| !matches!(c, ',' | '}' | ']' | '"' | ' '))
                        .collect();
                    names.push((value, format!("{} {} {key}", args[0], args[1])));
                }
            }
        }
    }
    names
}

/// An env's names in samconfig.toml: its stack, its S3 prefix, and the secrets and topic its
/// `parameter_overrides` name (an ARN's trailing `-EDIT-ME` or 6-character suffix left off).
fn samconfig_names(samconfig: &str, env: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let mut section = String::new();
    for line in samconfig.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        if line.starts_with('#') || !section.starts_with(&format!("[{env}.")) {
            continue;
        }
        if let Some(value) = line
            .strip_prefix("stack_name = ")
            .or_else(|| line.strip_prefix("s3_prefix = "))
        {
            let what = format!(
                "{} in [{env}.…]",
                line.split(' ').next().unwrap_or_default()
            );
            names
                .entry(value.trim_matches('"').to_string())
                .or_insert(what);
            continue;
        }
        let Some(entry) = line.strip_prefix('"').and_then(|l| l.split('"').next()) else {
            continue;
        };
        let Some((key, value)) = entry.split_once('=') else {
            continue;
        };
        let name = if let Some((_, secret)) = value.split_once(":secret:") {
            secret
                .strip_suffix("-EDIT-ME")
                .or_else(|| secret.get(..secret.len().saturating_sub(7)))
        } else if value.starts_with("arn:aws:sns:") {
            value
                .rsplit(':')
                .next()
                .map(|t| t.trim_end_matches("-EDIT-ME"))
        } else {
            None
        };
        if let Some(name) = name {
            names.insert(
                name.to_string(),
                format!("{key} in [{env}.deploy.parameters]"),
            );
        }
    }
    names
}

#[test]
fn the_dev_and_prod_envs_name_nothing_alike_in_the_docs_and_samconfig() {
    let work = std::env::temp_dir().join(format!("env-names-{}", uuid::Uuid::new_v4().simple()));
    let samconfig = std::fs::read_to_string(root().join("samconfig.toml")).unwrap();
    let mut names: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for env in ENVS {
        let config = samconfig_names(&samconfig, env);
        let stack_name = samconfig
            .split(&format!("[{env}.global.parameters]"))
            .nth(1)
            .and_then(|rest| rest.lines().find_map(|l| l.strip_prefix("stack_name = ")))
            .map(|name| name.trim_matches('"').to_string())
            .unwrap_or_else(|| panic!("samconfig.toml: no stack_name for {env}"));
        let mut docs = BTreeMap::new();
        for doc in DOCS {
            let run = run_doc(doc, env, &work);
            if run.stack != stack_name {
                problems.push(format!(
                    "{doc} with ENV={env}: STACK is {:?}, samconfig.toml's stack_name {stack_name:?}",
                    run.stack
                ));
            }
            let made = created(&run.commands);
            if doc == "docs/deploy.md" {
                for (service, operation, option) in CREATED {
                    let what = format!("{service} {operation} {option}");
                    if !made.iter().any(|(_, w)| *w == what) {
                        problems.push(format!("{doc} with ENV={env}: no `aws {what}` seen"));
                    }
                }
            }
            docs.extend(made);
        }
        // Each name the docs create carries the env as a word of its own.
        for (name, what) in &docs {
            if !name
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w == env)
            {
                problems.push(format!("ENV={env}: {what} {name:?} does not carry the env"));
            }
        }
        // samconfig.toml's secrets and topic are the ones the docs create for the env.
        for (name, what) in &config {
            if what.contains("deploy.parameters") && !docs.contains_key(name) {
                problems.push(format!(
                    "samconfig.toml's {what} names {name:?}, which the docs do not create for {env}"
                ));
            }
        }
        let mut all = docs;
        all.extend(config);
        names.insert(env, all);
    }
    let _ = std::fs::remove_dir_all(&work);
    let shared: Vec<String> = names["dev"]
        .iter()
        .filter(|(name, _)| names["prod"].contains_key(*name))
        .map(|(name, what)| format!("{name:?} ({what})"))
        .collect();
    assert!(
        shared.is_empty(),
        "dev and prod both name: {}",
        shared.join(", ")
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        names.values().all(|n| n.len() >= 10),
        "too few names seen: {names:?}"
    );
}
