//! `scripts/preflight` against moto: an account that can carry the stack passes, and one that
//! gets every check wrong fails each with its fix, without ever printing a secret. The AWS
//! CLI, python and boto3 come from `target/test-tools/` (scripts/test); moto has no Lambda
//! account settings, so a loopback stand-in answers `GetAccountSettings` (and
//! `GetFunctionConcurrency` for a stack already deployed).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use axum::{routing::get, Json, Router};
use serde_json::{json, Value};

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `GET /2016-08-19/account-settings` as Lambda answers it, with `unreserved` executions left;
/// with `held`, every function reserves that many (`GET …/functions/{name}/concurrency`).
async fn lambda_account_settings(unreserved: u32, held: Option<u32>) -> String {
    let settings = json!({
        "AccountLimit": {"ConcurrentExecutions": 1000, "UnreservedConcurrentExecutions": unreserved,
                         "TotalCodeSize": 80530636800_u64, "CodeSizeUnzipped": 262144000, "CodeSizeZipped": 52428800},
        "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
    });
    let mut app = Router::new().route(
        "/2016-08-19/account-settings",
        get(move || async move { Json(settings) }),
    );
    if let Some(held) = held {
        app = app.route(
            "/2019-09-30/functions/{name}/concurrency",
            get(move || async move { Json(json!({"ReservedConcurrentExecutions": held})) }),
        );
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// The environment that points the AWS CLI and boto3 at moto (and Lambda at `lambda`). Not
/// us-east-1: there the AWS CLI v1 pins some services (RDS) to their global host whatever
/// the endpoint variables say.
fn aws_env(moto: &[(&'static str, String)], lambda: &str, tools: &Path) -> Vec<(String, String)> {
    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    moto.iter()
        .filter(|(name, _)| *name != "AWS_REGION")
        .map(|(name, value)| (name.to_string(), value.clone()))
        .chain([
            ("AWS_REGION".into(), "eu-west-1".into()),
            ("AWS_DEFAULT_REGION".into(), "eu-west-1".into()),
            ("AWS_ENDPOINT_URL_LAMBDA".into(), lambda.into()),
            ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
            ("PATH".into(), path),
        ])
        .collect()
}

/// Runs a command off the runtime's thread (the Lambda stand-in serves on it meanwhile).
async fn run(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().expect("the command starts"))
        .await
        .unwrap()
}

/// Creates `mode`'s resources in moto (testkit/tests/preflight_fixtures.py).
async fn fixtures(mode: &str, env: &[(String, String)], tools: &Path) -> Value {
    fixtures_named(mode, mode, env, tools).await
}

/// As [`fixtures`], with the resources named after `name` (one moto serves every test).
async fn fixtures_named(mode: &str, name: &str, env: &[(String, String)], tools: &Path) -> Value {
    let mut command = Command::new(tools.join("python"));
    command
        .arg(root().join("testkit/tests/preflight_fixtures.py"))
        .args([mode, name])
        .envs(env.iter().cloned());
    let out = run(command).await;
    assert!(
        out.status.success(),
        "fixtures: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A samconfig.toml with the env `t` for the stack `stack`, the same shape as the repository's.
fn samconfig(stack: &str, parameters: &[String]) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("preflight-{}.toml", uuid::Uuid::new_v4().simple()));
    let list: String = parameters.iter().map(|p| format!("  \"{p}\",\n")).collect();
    std::fs::write(
        &path,
        format!(
            "[t.global.parameters]\nstack_name = \"{stack}\"\nregion = \"eu-west-1\"\n\n\
             [t.deploy.parameters]\nconfirm_changeset = false\n# a comment\n\
             parameter_overrides = [\n{list}]\n"
        ),
    )
    .unwrap();
    path
}

async fn preflight(config: &Path, env: &[(String, String)]) -> (bool, String) {
    preflight_with(config, env, &[]).await
}

async fn preflight_with(
    config: &Path,
    env: &[(String, String)],
    args: &[String],
) -> (bool, String) {
    let mut command = Command::new("bash");
    command
        .arg(root().join("scripts/preflight"))
        .args(["--config-env", "t", "--config-file"])
        .arg(config)
        .args(args)
        .envs(env.iter().cloned());
    let out = run(command).await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Moto, the tools and the Lambda stand-in with `unreserved` executions (and `held` per
/// deployed function); `None` (skipped loudly) without moto outside `scripts/test`.
async fn setup(unreserved: u32, held: Option<u32>) -> Option<(Vec<(String, String)>, PathBuf)> {
    let moto = testkit::moto::aws_env()?;
    let tools = testkit::moto::tool("aws")?.parent().unwrap().to_path_buf();
    let lambda = lambda_account_settings(unreserved, held).await;
    Some((aws_env(&moto, &lambda, &tools), tools))
}

#[tokio::test]
async fn an_account_ready_for_the_stack_passes_every_check() {
    // The stack is deployed: its worker's 101 are reserved already, so only 150 are left
    // unreserved, and the 101 + 50 the env reserves, with the 100 Lambda keeps unreserved,
    // still fit (counted once, not twice).
    let Some((env, tools)) = setup(150, Some(101)).await else {
        return;
    };
    let f = fixtures("good", &env, &tools).await;
    let config = samconfig(
        "triage-good",
        &[
            "Stage=prod".into(),
            format!("SubnetIds={}", f["subnets"].as_str().unwrap()),
            format!("SecurityGroupIds={}", f["sg"].as_str().unwrap()),
            format!("DbSecretArn={}", f["db_secret"].as_str().unwrap()),
            format!("ApiDbSecretArn={}", f["api_db_secret"].as_str().unwrap()),
            format!(
                "DelivererDbSecretArn={}",
                f["deliverer_db_secret"].as_str().unwrap()
            ),
            "ApiReservedConcurrency=50".into(),
            "Provider=openai".into(),
            format!(
                "ProviderSecretArn={}",
                f["provider_secret"].as_str().unwrap()
            ),
            r#"SweeperSchedule=\"rate(1 minute)\""#.into(),
            format!("AlarmTopicArn={}", f["topic"].as_str().unwrap()),
        ],
    );
    // The database behind step 4's tunnel, its logins made by roles.sql with the stored
    // passwords; plain TCP on loopback where RDS's tunnel would need TLS.
    let password = f["password"].as_str().unwrap();
    let server = testkit::OwnServer::start_new("preflight-postgres");
    testkit::roles_sql(
        server.url(),
        &[
            ("app_role", "triage"),
            ("app_password", password),
            ("api_login", "triage_api_login"),
            ("api_password", &format!("api-{password}")),
            ("deliver_login", "triage_deliver_login"),
            ("deliver_password", &format!("deliver-{password}")),
        ],
    );
    let port = server
        .url()
        .parse::<tokio_postgres::Config>()
        .unwrap()
        .get_ports()[0];
    let tunnel = ["--db-tunnel".to_string(), format!("127.0.0.1:{port}")];
    let env: Vec<(String, String)> = env
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "PATH" => (
                k,
                format!("{}:{v}", testkit::psql().parent().unwrap().display()),
            ),
            _ => (k, v),
        })
        .chain([("PGSSLMODE".to_string(), "disable".to_string())])
        .collect();
    let (passed, out) = preflight_with(&config, &env, &tunnel).await;
    assert!(passed, "{out}");
    for seen in [
        "ok    DbSecretArn: triage logs in",
        "ok    ApiDbSecretArn: triage_api_login logs in and is in triage_api",
        "ok    DelivererDbSecretArn: triage_deliver_login logs in and is in triage_deliver",
        "ok    the stack triage-good holds 101 reserved executions already",
        "ok    Lambda concurrency: 251 of 1000 unreserved, the worker reserves 101, the API 50",
        "egress through nat-",
        "ok    DbSecretArn: the RDS shape",
        "ok    ApiDbSecretArn exists (the API's own login)",
        "ok    DelivererDbSecretArn exists (the deliverer's own login)",
        "ok    RDS triage-good: max_connections 811 (about, RDS's default for db.t4g.large) exceeds the 523 the functions can open ((100 + 1) x 4 worker + (10 + 1) x 4 deliverer + 50 x 1 API + 25 sweeper, scaler, ops, migrate)",
        "ok    ProviderSecretArn exists",
        "ok    RDS triage-good: postgres 16.4",
        "admits the functions' security group sg-",
        "ok    AlarmTopicArn: 1 confirmed subscription(s)",
        "all checks passed",
    ] {
        assert!(out.contains(seen), "no {seen:?} in:\n{out}");
    }
    assert!(!out.contains("FAIL"), "{out}");
    assert!(
        out.contains("ok    the audit trail does not exist yet: after the first deploy, hand it to triage_audit"),
        "{out}"
    );

    // Round four: after a first deploy whose re-run of roles.sql was forgotten, the trail is
    // still the application's; handed over, it passes.
    let (db, connection) = tokio_postgres::connect(server.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    db.batch_execute(
        "CREATE TABLE operation_audit (id bigint); ALTER TABLE operation_audit OWNER TO triage",
    )
    .await
    .unwrap();
    let (passed, out) = preflight_with(&config, &env, &tunnel).await;
    assert!(!passed, "{out}");
    assert!(
        out.contains("FAIL  the audit trail (operation_audit) belongs to triage, not triage_audit")
            && out.contains("run docs/sql/roles.sql again without passwords"),
        "{out}"
    );
    db.batch_execute("ALTER TABLE operation_audit OWNER TO triage_audit")
        .await
        .unwrap();
    let (passed, out) = preflight_with(&config, &env, &tunnel).await;
    assert!(passed, "{out}");
    assert!(
        out.contains("ok    the audit trail (operation_audit) belongs to triage_audit"),
        "{out}"
    );
    // (A stand-in without its trigger: roles.sql, run again below, would look for it.)
    db.batch_execute("DROP TABLE operation_audit")
        .await
        .unwrap();

    // A secret that exists but holds a password the login no longer has: the API would
    // answer 503 from its first request.
    testkit::roles_sql(
        server.url(),
        &[
            ("app_role", "triage"),
            ("api_login", "triage_api_login"),
            ("api_password", "another-password"),
        ],
    );
    let (passed, out) = preflight_with(&config, &env, &tunnel).await;
    std::fs::remove_file(&config).unwrap();
    assert!(!passed, "{out}");
    assert!(
        out.contains("FAIL  ApiDbSecretArn: triage_api_login cannot log in through 127.0.0.1:")
            && out.contains("run docs/sql/roles.sql with this login and its password"),
        "{out}"
    );
    assert!(out.contains("ok    DbSecretArn: triage logs in"), "{out}");
    assert!(
        !out.contains(password) && !out.contains("another-password"),
        "{out}"
    );
    assert!(!out.contains(f["password"].as_str().unwrap()), "{out}");
}

#[tokio::test]
async fn a_dev_smoke_test_passes_on_endpoints_alone_with_warnings_for_what_prod_would_refuse() {
    let Some((env, tools)) = setup(990, None).await else {
        return;
    };
    let f = fixtures("dev", &env, &tools).await;
    let config = samconfig(
        "triage-dev",
        &[
            "Stage=dev".into(),
            format!("SubnetIds={}", f["subnets"].as_str().unwrap()),
            format!("SecurityGroupIds={}", f["sg"].as_str().unwrap()),
            format!("DbSecretArn={}", f["db_secret"].as_str().unwrap()),
            format!("DbHost={}", f["db_host"].as_str().unwrap()),
            "DbName=triage".into(),
            "Provider=rules".into(),
            "MaxWorkerConcurrency=2".into(),
            "WorkerReservedConcurrency=3".into(),
        ],
    );
    let (passed, out) = preflight(&config, &env).await;
    std::fs::remove_file(&config).unwrap();
    assert!(passed, "{out}");
    for seen in [
        "Secrets Manager through its interface endpoint",
        "SQS (the scaler's doorbells) through its interface endpoint",
        "EventBridge (the deliverer's PutEvents) through its interface endpoint",
        "has no egress: webhooks to the internet cannot be delivered",
        "max_connections 150 (set in triage-dev) exceeds the",
        "warn  no ApiDbSecretArn",
        "warn  no DelivererDbSecretArn",
        "warn  the database logins were not tried (no --db-tunnel; fine for dev)",
        "S3 (the migration's answer to CloudFormation) through the gateway endpoint",
        "ok    DbSecretArn: the RDS shape",
        "ok    Provider=rules: no provider secret needed",
        "warn  the functions log in as the master user triage_admin",
        "warn  no AlarmTopicArn",
    ] {
        assert!(out.contains(seen), "no {seen:?} in:\n{out}");
    }
    assert!(!out.contains(f["password"].as_str().unwrap()), "{out}");
}

#[tokio::test]
async fn an_account_that_cannot_carry_the_stack_fails_each_check_with_its_fix() {
    let Some((env, tools)) = setup(10, None).await else {
        return;
    };
    let f = fixtures("bad", &env, &tools).await;
    let config = samconfig(
        "triage-bad",
        &[
            "Stage=prod".into(),
            format!("SubnetIds={}", f["subnets"].as_str().unwrap()),
            "SecurityGroupIds=sg-EDIT-ME".into(),
            "WorkerSchedule=rate(5 minutes)".into(),
            "WorkerReservedConcurrency=50".into(),
            format!("DbSecretArn={}", f["db_secret"].as_str().unwrap()),
            format!(
                "ProviderSecretArn={}",
                f["provider_secret"].as_str().unwrap()
            ),
            format!("AlarmTopicArn={}", f["topic"].as_str().unwrap()),
        ],
    );
    let (passed, out) = preflight(&config, &env).await;
    std::fs::remove_file(&config).unwrap();
    assert!(!passed, "{out}");
    for (problem, fix) in [
        ("placeholders: SecurityGroupIds", "replace each EDIT-ME"),
        (
            "WorkerSchedule has spaces but no quotes",
            "escaped double quotes",
        ),
        (
            "WorkerReservedConcurrency (50) is not above MaxWorkerConcurrency (100)",
            "set WorkerReservedConcurrency=101",
        ),
        (
            "Lambda concurrency: 10 of 1000 unreserved",
            "--quota-code L-B99A9384",
        ),
        (
            "reaches no Secrets Manager",
            "com.amazonaws.eu-west-1.secretsmanager",
        ),
        (
            "reaches no SQS: no NAT route and no interface endpoint",
            "--service-name com.amazonaws.eu-west-1.sqs",
        ),
        (
            "reaches no EventBridge: no NAT route and no interface endpoint",
            "--service-name com.amazonaws.eu-west-1.events",
        ),
        (
            "Stage=prod without ApiDbSecretArn",
            "docs/sql/roles.sql, docs/deploy.md step 4",
        ),
        (
            "Stage=prod without DelivererDbSecretArn",
            "docs/sql/roles.sql, docs/deploy.md step 4",
        ),
        (
            "Stage=prod: the database logins were not tried",
            "run the preflight again with --db-tunnel localhost:15432",
        ),
        (
            "RDS triage-bad: max_connections 202 (about, RDS's default for db.t4g.small) is below the 523 connections",
            "--db-instance-class db.t4g.large",
        ),
        (
            "reaches no S3",
            "--vpc-endpoint-type Gateway --service-name com.amazonaws.eu-west-1.s3",
        ),
        (
            "has no egress: the worker cannot reach the openai API",
            "NAT gateway",
        ),
        (
            "DbSecretArn: port is neither a number nor a string of digits",
            "put-secret-value",
        ),
        (
            "logs in as the master user triage_admin",
            "docs/sql/roles.sql",
        ),
        ("0.0.0.0/0 to the internet gateway", "use private subnets"),
        (
            "do not admit the functions'",
            "authorize-security-group-ingress",
        ),
        ("ProviderSecretArn", "create it"),
        (
            "RDS triage-bad runs postgres 15.8",
            "--allow-major-version-upgrade",
        ),
        ("AlarmTopicArn", "aws sns create-topic --name no-such-topic"),
    ] {
        assert!(
            out.contains(problem) && out.contains(fix),
            "no {problem:?} / {fix:?} in:\n{out}"
        );
    }
    assert!(out.contains("preflight: 20 problem(s)"), "{out}");
    assert!(
        out.contains("warn  no CallerDailyTickets: one caller may create tickets without limit"),
        "{out}"
    );
    assert!(!out.contains(f["password"].as_str().unwrap()), "{out}");
}

/// A VPC with the endpoints a smoke test once needed (Secrets Manager, SQS, S3) reaches no
/// EventBridge: every result's delivery to the stack's bus would time out and be retried until
/// DeliveryLagAlarm fires. Outside dev, a VPC without egress cannot deliver webhooks either,
/// whatever the provider.
#[tokio::test]
async fn the_deliverer_needs_a_route_to_eventbridge_and_outside_dev_egress_for_webhooks() {
    let Some((env, tools)) = setup(990, None).await else {
        return;
    };
    let f = fixtures("endpoints", &env, &tools).await;
    let parameters = |stage: &str| {
        vec![
            format!("Stage={stage}"),
            format!("SubnetIds={}", f["subnets"].as_str().unwrap()),
            format!("SecurityGroupIds={}", f["sg"].as_str().unwrap()),
            format!("DbSecretArn={}", f["db_secret"].as_str().unwrap()),
            format!("DbHost={}", f["db_host"].as_str().unwrap()),
            "DbName=triage".into(),
            "Provider=rules".into(),
            "MaxWorkerConcurrency=2".into(),
            "WorkerReservedConcurrency=3".into(),
        ]
    };
    let config = samconfig("triage-endpoints", &parameters("dev"));
    let (passed, out) = preflight(&config, &env).await;
    std::fs::remove_file(&config).unwrap();
    assert!(!passed, "{out}");
    assert!(
        out.contains("reaches no EventBridge: no NAT route and no interface endpoint")
            && out.contains("DeliveryLagAlarm fires")
            && out.contains("--service-name com.amazonaws.eu-west-1.events"),
        "{out}"
    );
    assert!(
        out.contains("warn  ") && out.contains("has no egress: webhooks to the internet"),
        "{out}"
    );
    // Everything else a smoke test needs is there: the bus is the one problem.
    assert!(out.contains("preflight: 1 problem(s)"), "{out}");

    let config = samconfig("triage-endpoints", &parameters("prod"));
    let (passed, out) = preflight(&config, &env).await;
    std::fs::remove_file(&config).unwrap();
    assert!(!passed, "{out}");
    assert!(
        out.contains("has no egress: the deliverer cannot reach any webhook endpoint")
            && out.contains("to a NAT gateway in a public subnet"),
        "{out}"
    );
}

/// The deliverers have no reservation: they, the sweeper, the scaler, ops and the migration
/// run on what the worker's and the API's reservations leave unreserved, and Lambda keeps at
/// least 100 unreserved (a function may reserve up to the account's concurrency minus 100).
/// dev's figures: 3 + 2 reserved and 100 left, 105 in all; with 100 deliverers, 105 must stay
/// unreserved, 110 in all.
#[tokio::test]
async fn the_lambda_quota_leaves_room_for_the_deliverers_beside_both_reservations() {
    let Some((env, tools)) = setup(107, None).await else {
        return;
    };
    let f = fixtures_named("dev", "quota", &env, &tools).await;
    let parameters = |deliverers: &str| {
        vec![
            "Stage=dev".into(),
            format!("SubnetIds={}", f["subnets"].as_str().unwrap()),
            format!("SecurityGroupIds={}", f["sg"].as_str().unwrap()),
            format!("DbSecretArn={}", f["db_secret"].as_str().unwrap()),
            format!("DbHost={}", f["db_host"].as_str().unwrap()),
            "DbName=triage".into(),
            "Provider=rules".into(),
            "MaxWorkerConcurrency=2".into(),
            "WorkerReservedConcurrency=3".into(),
            "ApiReservedConcurrency=2".into(),
            format!("MaxDelivererConcurrency={deliverers}"),
        ]
    };
    let config = samconfig("triage-quota", &parameters("100"));
    let (passed, out) = preflight(&config, &env).await;
    std::fs::remove_file(&config).unwrap();
    assert!(!passed, "{out}");
    assert!(
        out.contains(
            "FAIL  Lambda concurrency: 107 of 1000 unreserved; the worker reserves 3, the API 2, \
             which leaves 102 for (100 + 1) deliverers, the sweeper, scaler, ops and migration \
             (105 at their peak)"
        ) && out.contains("raise the quota to 1003 or more")
            && out.contains("lower MaxDelivererConcurrency"),
        "{out}"
    );
    // (100 deliverers also open more connections than the fixture's database allows: the
    // preflight says so too, a second problem.)

    let config = samconfig("triage-quota", &parameters("2"));
    let (passed, out) = preflight(&config, &env).await;
    std::fs::remove_file(&config).unwrap();
    assert!(passed, "{out}");
    assert!(
        out.contains(
            "ok    Lambda concurrency: 107 of 1000 unreserved, the worker reserves 3, the API 2, \
             and 100 stay unreserved for (2 + 1) deliverers"
        ),
        "{out}"
    );
}

/// Round four, item 10: prod's reservations (101 + 50) need 251 unreserved, not 166: a quota
/// between the two used to pass the preflight and fail the first create. docs/deploy.md step 2
/// says the figure the preflight computes.
#[tokio::test]
async fn prods_reservations_need_251_unreserved_executions_as_the_deploy_guide_says() {
    let guide = std::fs::read_to_string(root().join("docs/deploy.md")).unwrap();
    assert!(
        guide.contains("prod's 101 + 50 + 100 = **251**, dev's 3 + 2 + 100 = **105**"),
        "docs/deploy.md step 2"
    );
    for (unreserved, passes) in [(250, false), (251, true)] {
        let Some((env, tools)) = setup(unreserved, None).await else {
            return;
        };
        let f = fixtures_named("dev", &format!("prodquota{unreserved}"), &env, &tools).await;
        let config = samconfig(
            &format!("triage-prodquota{unreserved}"),
            &[
                "Stage=dev".into(),
                format!("SubnetIds={}", f["subnets"].as_str().unwrap()),
                format!("SecurityGroupIds={}", f["sg"].as_str().unwrap()),
                format!("DbSecretArn={}", f["db_secret"].as_str().unwrap()),
                format!("DbHost={}", f["db_host"].as_str().unwrap()),
                "DbName=triage".into(),
                "Provider=rules".into(),
                "MaxWorkerConcurrency=100".into(),
                "WorkerReservedConcurrency=101".into(),
                "ApiReservedConcurrency=50".into(),
                "MaxDelivererConcurrency=10".into(),
            ],
        );
        let (passed, out) = preflight(&config, &env).await;
        std::fs::remove_file(&config).unwrap();
        let line = out
            .lines()
            .find(|l| l.contains("Lambda concurrency:"))
            .unwrap_or_default()
            .to_string();
        if passes {
            assert!(
                line.starts_with("ok    Lambda concurrency: 251 of 1000"),
                "{out}"
            );
        } else {
            assert!(!passed, "{out}");
            assert!(
                line.contains(
                    "Lambda keeps 100 unreserved, so creating the functions fails (it needs 251)"
                ),
                "{out}"
            );
        }
    }
}

/// The prod env sets the API's per-caller quota (the template's CallerDailyTickets, empty by
/// default), which the preflight reports.
#[test]
fn the_prod_env_sets_a_per_caller_daily_quota() {
    let samconfig = std::fs::read_to_string(root().join("samconfig.toml")).unwrap();
    let prod = samconfig
        .split("[prod.deploy.parameters]")
        .nth(1)
        .expect("the prod env");
    let quota = prod
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|l| l.trim().strip_prefix("\"CallerDailyTickets="))
        .expect("prod sets CallerDailyTickets");
    let quota = quota.trim_end_matches(['"', ',']);
    assert!(
        quota.parse::<u32>().is_ok_and(|n| n > 0),
        "CallerDailyTickets={quota}"
    );
}
