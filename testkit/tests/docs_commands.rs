//! The command blocks of docs/deploy.md, docs/runbook.md, docs/delivery.md (a consumer's
//! subscriptions and EventBridge rules) and docs/zendesk.md, as a reader pastes them: every
//! `sh` block passes `bash -n`, and every `aws` command in them passes the AWS CLI's own
//! parsing of its options and shorthand, with the arguments the shell really hands it
//! (quotes stripped, variables expanded).
//!
//! Each block runs in bash with a `PATH` holding only an `aws` stand-in: every other external
//! command (psql, curl, git, python3, sleep…) is "not found" and answered by
//! `command_not_found_handle` with a placeholder, so nothing but builtins runs. The stand-in
//! records its arguments and hands them to the real AWS CLIs in `target/test-tools`, v2
//! (`bin/aws2`, the CLI docs/deploy.md requires; `scripts/awscli-v2`, Linux x86_64 only) and v1
//! (`bin/aws`), both pointed at a closed loopback port: a CLI validates the parameters against
//! the service model before it connects, so "Could not connect to the endpoint URL" means the
//! command parsed, and anything else (*Error parsing parameter*, *Invalid type for parameter*,
//! *Unknown options*) is a doc bug. v1 is spared what only v2 has: the commands named in
//! `V2_ONLY` and the option `--cli-binary-format`.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use testkit::markdown::sh_blocks;

/// `aws` subcommands of AWS CLI v2 that v1 lacks: run by v2 only.
const V2_ONLY: &[&str] = &["configure export-credentials", "logs tail"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `aws` stand-in: records `argv` as one JSON line in `$DOCS_AWS_LOG` with the verdict of
/// each real CLI, and prints a placeholder for the command substitution around it.
const STAND_IN: &str = r#"
import json, os, subprocess, sys

args = sys.argv[1:]
record = {"args": args, "line": os.environ.get("DOCS_BLOCK_LINE", "?"), "checked": []}
words = [a for a in args if not a.startswith("-")]
runs = {}
if os.environ.get("DOCS_REAL_AWS2"):
    runs["v2"] = [os.environ["DOCS_REAL_AWS2"], *args]
if " ".join(words[:2]) not in os.environ["DOCS_V2_ONLY"].split(","):
    v1 = []
    skip = False
    for arg in args:
        # v2's option for raw JSON payloads; v1 takes JSON payloads as they are.
        if skip:
            skip = False
            continue
        if arg == "--cli-binary-format":
            skip = True
            continue
        v1.append(arg)
    runs["v1"] = [os.environ["DOCS_REAL_AWS"], *v1]
# A payload piped in (file:///dev/stdin) is read once and handed to each CLI.
data = sys.stdin.buffer.read() if "file:///dev/stdin" in args else b""
started = {cli: subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
           for cli, argv in runs.items()}
refusals = []
for cli, child in started.items():
    out, err = child.communicate(data, timeout=60)
    err = err.decode(errors="replace")
    # export-credentials answers from the environment, without connecting.
    if "Could not connect to the endpoint URL" in err or child.returncode == 0:
        record["checked"].append(cli)
    else:
        refusals.append(cli + ": " + err.strip()[-600:])
record["verdict"] = "refused" if refusals else "parsed" if runs else "v2-only"
record["stderr"] = "\n    ".join(refusals)
with open(os.environ["DOCS_AWS_LOG"], "a") as log:
    log.write(json.dumps(record) + "\n")
print("PLACEHOLDER")
"#;

struct Harness {
    dir: PathBuf,
    aws: PathBuf,
    /// AWS CLI v2, where `scripts/awscli-v2` could install it (Linux x86_64).
    aws2: Option<PathBuf>,
    endpoint: String,
}

impl Harness {
    fn new() -> Option<Self> {
        let aws = testkit::moto::tool("aws")?;
        let python = aws.parent().unwrap().join("python");
        let aws2 = aws.with_file_name("aws2");
        let aws2 = if aws2.exists() {
            Some(aws2)
        } else if cfg!(all(target_os = "linux", target_arch = "x86_64"))
            && std::env::var_os("MOTO_SERVER").is_some()
        {
            panic!(
                "{} is missing (scripts/test installs it with scripts/awscli-v2)",
                aws2.display()
            )
        } else {
            let _ = writeln!(
                std::io::stderr(),
                "\n!!!!! CHECKING WITH AWS CLI v1 ONLY: {} is missing (scripts/awscli-v2, Linux x86_64).\n",
                aws2.display()
            );
            None
        };
        let dir =
            std::env::temp_dir().join(format!("docs-commands-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let stand_in = dir.join("bin/aws");
        std::fs::write(&stand_in, format!("#!{}\n{STAND_IN}", python.display())).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // A port nobody listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Some(Harness {
            dir,
            aws,
            aws2,
            endpoint: format!("http://127.0.0.1:{port}"),
        })
    }

    /// `bash -n` of one block: its complaint, if any.
    fn syntax(&self, block: &str) -> Option<String> {
        let mut child = Command::new("bash")
            .arg("-n")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(block.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Runs blocks `(line, text)` in order in one bash, with nothing but builtins and the
    /// stand-in; the `aws` records, each with its block's line.
    fn aws_commands(&self, name: &str, blocks: &[(usize, String)]) -> Vec<serde_json::Value> {
        let work = self.dir.join(name);
        std::fs::create_dir_all(&work).unwrap();
        let log = work.join("aws.jsonl");
        // A command's `--out FILE` exists after it (`aws s3 cp` checks its source before it
        // connects); a permissions boundary looked up answers an ARN: IAM refuses shorter ones.
        let mut script = String::from(
            "command_not_found_handle() { local prev arg\n  \
               for arg in \"$@\"; do [ \"$prev\" = --out ] && : >\"$arg\"; prev=$arg; done\n  \
               case \"$*\" in\n  \
               *PermissionsBoundary=*) echo arn:aws:iam::123456789012:policy/PLACEHOLDER ;;\n  \
               *) echo PLACEHOLDER ;;\nesac; return 0; }\nset -- '{\"op\": \"stats\"}'\n",
        );
        for (line, block) in blocks {
            script.push_str(&format!("export DOCS_BLOCK_LINE={line}\n{block}\n"));
        }
        // The blocks' own failures (a command "not found", a placeholder that is no number)
        // do not matter here: only what reached the stand-in does.
        let mut child = Command::new("/bin/bash")
            .arg("-c")
            .arg(script)
            .current_dir(&work)
            .env_clear()
            .env("PATH", self.dir.join("bin"))
            .env("HOME", &work)
            .env("AWS_REGION", "eu-west-1")
            .env("AWS_DEFAULT_REGION", "eu-west-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_MAX_ATTEMPTS", "1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_PAGER", "")
            .env("DOCS_AWS_LOG", &log)
            .env("DOCS_REAL_AWS", &self.aws)
            .env(
                "DOCS_REAL_AWS2",
                self.aws2.as_deref().unwrap_or_else(|| Path::new("")),
            )
            .env("DOCS_V2_ONLY", V2_ONLY.join(","))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // What `read` gets: a line of input each time. The shell may stop reading before the
        // end, so a closed pipe is no failure.
        let _ = child
            .stdin
            .take()
            .unwrap()
            .write_all("INPUT\n".repeat(200).as_bytes());
        child.wait().unwrap();
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn every_command_block_parses_in_bash_and_every_aws_command_in_the_aws_cli() {
    let Some(harness) = Harness::new() else {
        return;
    };
    // The documents side by side (each AWS CLI start costs about a second).
    let results: Vec<(Vec<String>, Vec<serde_json::Value>)> = std::thread::scope(|scope| {
        // Each document with the fewest sh blocks it has.
        let runs: Vec<_> = [
            ("docs/deploy.md", 5),
            ("docs/runbook.md", 5),
            ("docs/delivery.md", 4),
            ("docs/zendesk.md", 2),
        ]
        .into_iter()
        .map(|(doc, at_least)| {
            let harness = &harness;
            scope.spawn(move || {
                let text = std::fs::read_to_string(root().join(doc)).unwrap();
                let mut problems = Vec::new();
                let mut blocks = sh_blocks(&text);
                assert!(
                    blocks.len() >= at_least,
                    "{doc}: only {} sh blocks",
                    blocks.len()
                );
                blocks.retain(|(line, block)| match harness.syntax(block) {
                    Some(complaint) => {
                        problems.push(format!("{doc}:{line}: bash -n: {complaint}"));
                        false
                    }
                    None => true,
                });
                let mut records = harness.aws_commands(&doc.replace('/', "-"), &blocks);
                for record in &mut records {
                    record["doc"] = doc.into();
                }
                (problems, records)
            })
        })
        .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    let mut problems = Vec::new();
    let mut parsed = 0;
    let mut v2_only = 0;
    let mut by_v2 = 0;
    let mut seen = Vec::new();
    for (syntax, records) in results {
        problems.extend(syntax);
        for record in records {
            let doc = record["doc"].as_str().unwrap();
            let line = record["line"].as_str().unwrap();
            let args: Vec<&str> = record["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            seen.push(args.join(" "));
            by_v2 += usize::from(record["checked"].as_array().unwrap().contains(&"v2".into()));
            match record["verdict"].as_str().unwrap() {
                "parsed" => parsed += 1,
                "v2-only" => v2_only += 1,
                _ => problems.push(format!(
                    "{doc}:{line} (the block's first line): aws {args:?}\n    {}",
                    record["stderr"].as_str().unwrap_or_default()
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The harness itself: it saw the commands, with the arguments the shell made of them.
    println!("aws commands parsed: {parsed} ({by_v2} by AWS CLI v2), v2-only (not run): {v2_only}");
    if harness.aws2.is_some() {
        assert_eq!(by_v2, parsed, "AWS CLI v2 checked every command");
    }
    assert!(
        parsed >= 50,
        "only {parsed} aws commands parsed:\n{}",
        seen.join("\n")
    );
    assert!(
        seen.iter()
            .any(|c| c.contains("create-cloud-formation-change-set")
                && c.contains(" Name=vpcSubnetIds,Value=\"PLACEHOLDER\" ")
                && c.contains(" Name=vpcSecurityGroupIds,Value=\"PLACEHOLDER\" ")),
        "the rotation's change set was not seen as the shell passes it:\n{}",
        seen.join("\n")
    );
    // The roles made outside the template get the boundary (docs/deploy.md, steps 4 and 12).
    for (command, option) in [
        ("iam create-role", "--permissions-boundary arn:"),
        (
            "cloudformation create-change-set",
            "--change-set-name with-boundary",
        ),
    ] {
        assert!(
            seen.iter()
                .any(|c| c.starts_with(command) && c.contains(option)),
            "no aws {command} with {option}:\n{}",
            seen.join("\n")
        );
    }
    // docs/delivery.md's: a consumer's policy and the removal of rules on the stack's bus;
    // docs/zendesk.md's upload of a set.
    for command in [
        "s3 cp",
        "iam put-role-policy",
        "events remove-targets",
        "events delete-rule",
    ] {
        assert!(
            seen.iter().any(|c| c.starts_with(command)),
            "no aws {command}:\n{}",
            seen.join("\n")
        );
    }
}

/// The check catches what issue 21 found: the rotation's subnet list written with the quotes
/// the shell strips reaches the CLI as a list, and the CLI refuses it.
#[test]
fn a_shorthand_value_the_shell_unquotes_is_reported() {
    let Some(harness) = Harness::new() else {
        return;
    };
    let broken = r#"aws serverlessrepo create-cloud-formation-change-set --application-id APP \
  --stack-name triage-db-rotation --capabilities CAPABILITY_IAM \
  --parameter-overrides Name=functionName,Value=triage-db-rotation \
    Name=vpcSubnetIds,Value="subnet-PRIVATE1,subnet-PRIVATE2"
"#;
    assert_eq!(harness.syntax(broken), None);
    let records = harness.aws_commands("broken", &[(1, broken.to_string())]);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["verdict"], "refused", "{records:?}");
    let stderr = records[0]["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("Invalid type for parameter ParameterOverrides[1].Value"),
        "{stderr}"
    );
}
