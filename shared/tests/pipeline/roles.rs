//! docs/deploy.md's database steps as an operator runs them, taken from its text (not a copy),
//! on a cluster of their own shaped like RDS for PostgreSQL: a master login with CREATEROLE and
//! CREATEDB and no superuser, password logins. Step 4 (roles.sql with new passwords, the
//! master's from Secrets Manager on moto), the stack's migration as the application role, the
//! upgrade's re-run without passwords (step 15); then each login may do what its process needs
//! and is refused the rest.

use std::{path::PathBuf, process::Command, sync::Arc, time::Duration};

use serde_json::json;
use testkit::OwnServer;
use triage::{config::Config, db};

use crate::{
    helpers::operations::op,
    helpers::webhooks::{fast_delivery, ingest, subscribe, Answer, Receiver},
    helpers::{assert_refused, TestApp},
};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `sh` block of the section headed `heading` in docs/deploy.md that runs roles.sql, as
/// written (an item's indentation removed), pointed at `port` instead of the SSM tunnel's
/// 15432, without TLS (the test server is plain TCP on loopback).
fn documented_command(heading: &str, port: u16) -> String {
    let text = std::fs::read_to_string(repo_root().join("docs/deploy.md")).unwrap();
    let section = &text[text.find(heading).expect(heading)..];
    let section = &section[..section[3..]
        .find("\n## ")
        .map_or(section.len(), |end| end + 3)];
    let block = section
        .split("```sh\n")
        .skip(1)
        .map(|b| &b[..b.find("```").unwrap()])
        .find(|b| b.contains("-f docs/sql/roles.sql"))
        .unwrap_or_else(|| panic!("no command running roles.sql under {heading}"));
    let indent = block.len() - block.trim_start_matches(' ').len();
    let block: String = block
        .lines()
        .map(|line| line.get(indent..).unwrap_or("").to_string() + "\n")
        .collect();
    for tunnel in ["port=15432", "sslmode=require"] {
        assert!(block.contains(tunnel), "{heading}: no {tunnel} in\n{block}");
    }
    block
        .replace("port=15432", &format!("port={port}"))
        .replace("sslmode=require", "sslmode=disable")
}

/// Runs `command` with bash in the repository, as an operator's shell would, with the AWS CLI
/// pointed at moto and psql of the tested major first on PATH, then prints `print`'s variables.
fn run_as_operator(command: &str, env: &[(String, String)], print: &[&str]) -> Vec<String> {
    let tail: String = print
        .iter()
        .map(|var| format!("printf '%s\\n' \"${var}\"\n"))
        .collect();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &format!("{command}{tail}")])
        .current_dir(repo_root())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{command}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    lines[lines.len() - print.len()..].to_vec()
}

fn login_url(port: u16, user: &str, password: &str) -> String {
    format!("postgres://{user}:{password}@127.0.0.1:{port}/triage?sslmode=disable")
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

fn app_as(url: &str) -> TestApp {
    let mut config = Config::local(url);
    fast_delivery(&mut config);
    TestApp {
        pool: db::pool(&config.database).unwrap(),
        config: Arc::new(config),
    }
}

#[tokio::test]
async fn the_documented_roles_steps_work_on_an_rds_shaped_cluster_first_time_and_every_time() {
    let (Some(moto), Some(aws)) = (testkit::moto::aws_env(), testkit::moto::tool("aws")) else {
        return;
    };
    let server = OwnServer::start_new("rds-postgres");
    let master: tokio_postgres::Config = server.url().parse().unwrap();
    let port = master.get_ports()[0];
    let master_password = String::from_utf8(master.get_password().unwrap().to_vec()).unwrap();

    let admin = connect(server.url()).await.unwrap();
    let row = admin
        .query_one(
            "SELECT current_setting('server_version_num')::int, rolsuper, rolcreaterole,
                    rolcreatedb, pg_get_userbyid(datdba) = current_user
             FROM pg_roles, pg_database
             WHERE rolname = current_user AND datname = current_database()",
            &[],
        )
        .await
        .unwrap();
    let (version, superuser): (i32, bool) = (row.get(0), row.get(1));
    assert!(version >= 160000, "the deployed major, not {version}");
    assert!(
        !superuser && row.get::<_, bool>(2) && row.get::<_, bool>(3) && row.get::<_, bool>(4),
        "a master login like RDS's: CREATEROLE CREATEDB, owner of the database, no superuser"
    );

    // The operator's shell: the AWS CLI on moto, the master's secret as RDS keeps it.
    let mut env: Vec<(String, String)> = moto
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let path = format!(
        "{}:{}:{}",
        testkit::psql().parent().unwrap().display(),
        aws.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.push(("PATH".into(), path));
    // The AWS CLI v1 reads its region from here only. Not us-east-1: there v1 sends RDS calls
    // to rds.amazonaws.com whatever AWS_ENDPOINT_URL says.
    env.push(("AWS_DEFAULT_REGION".into(), "eu-west-1".into()));
    env.push(("AWS_REGION".into(), "eu-west-1".into()));
    // The instance `triage-$ENV` with its RDS-managed master secret (step 4), holding this
    // server's master login: step 15 finds the secret from the instance's name.
    let deploy_env = format!("roles{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let aws_text = |args: &[&str]| {
        let out = Command::new(&aws)
            .args(args)
            .args(["--output", "text"])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        assert!(out.status.success(), "aws {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let arn = aws_text(&[
        "rds",
        "create-db-instance",
        "--db-instance-identifier",
        &format!("triage-{deploy_env}"),
        "--engine",
        "postgres",
        "--db-instance-class",
        "db.t4g.small",
        "--allocated-storage",
        "20",
        "--master-username",
        "triage_admin",
        "--manage-master-user-password",
        "--query",
        "DBInstance.MasterUserSecret.SecretArn",
    ]);
    let secret = json!({"username": "triage_admin", "password": master_password}).to_string();
    aws_text(&[
        "secretsmanager",
        "put-secret-value",
        "--secret-id",
        &arn,
        "--secret-string",
        &secret,
        "--query",
        "ARN",
    ]);
    env.push(("MASTER_SECRET".into(), arn));
    env.push(("ENV".into(), deploy_env));

    // Step 4, before the first deploy.
    let step_4 = documented_command("## 4. Database", port);
    let passwords = run_as_operator(
        &step_4,
        &env,
        &["APP_PASSWORD", "API_PASSWORD", "DELIVER_PASSWORD"],
    );
    let [app_pw, api_pw, deliver_pw] = [0, 1, 2].map(|i| passwords[i].clone());
    assert!(passwords.iter().all(|p| p.len() == 40), "{passwords:?}");
    let app_url = login_url(port, "triage", &app_pw);
    let api_url = login_url(port, "triage_api_login", &api_pw);
    let deliver_url = login_url(port, "triage_deliver_login", &deliver_pw);

    // The stack's migration runs as the application role; then the upgrade's re-run, which
    // passes no password (and, after the first deploy, hands the audit trail to its owner).
    db::migrate(&Config::local(&app_url).database)
        .await
        .expect("the application role migrates");
    let step_15 = documented_command("## 15. Upgrade", port);
    assert!(
        !step_15.contains("PASSWORD\""),
        "the upgrade passes no password:\n{step_15}"
    );
    // A day-2 shell: the master secret found again from the instance's name, not carried over.
    let day_2: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| k != "MASTER_SECRET")
        .cloned()
        .collect();
    run_as_operator(&step_15, &day_2, &[]);
    run_as_operator(&step_15, &day_2, &[]);
    for url in [&app_url, &api_url, &deliver_url] {
        let client = connect(url)
            .await
            .expect("every stored password still logs in");
        client.batch_execute("SELECT 1").await.unwrap();
    }

    // The application role runs the pipeline and its operations, audited.
    let app = app_as(&app_url);
    let receiver = Receiver::start(|_| Answer::Status(204)).await;
    subscribe(&app, None, &receiver.url).await;
    ingest(&app, None, "Charged twice").await;
    assert_eq!(app.run_worker_once(&app.worker()).await.evaluated, 1);
    op(&app, json!({"op": "stats"})).await;
    assert_eq!(
        app.count(
            "SELECT count(*) FROM operation_audit WHERE status = 'ok' AND finished_at IS NOT NULL"
        )
        .await,
        1
    );

    // The API: reads and inserts tickets, may not delete.
    let api = app_as(&api_url);
    let created = api
        .post_json(r#"{"subject":"a","message":"b"}"#.into(), Some("k1"))
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(
        api.get_ticket(created.body["id"].as_str().unwrap())
            .await
            .status,
        200
    );
    // Under a configured cascade it also reads which classifier the cascade is switched to.
    let mut cascaded = Config::clone(&api.config);
    cascaded.versions.model = "cascade(local-0123456789ab,0.9,gpt-6-luna@medium)"
        .parse()
        .unwrap();
    let cascaded = TestApp {
        pool: api.pool.clone(),
        config: Arc::new(cascaded),
    };
    let created = cascaded.post_ticket("c", "d").await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let client = connect(&api_url).await.unwrap();
    assert_refused(
        &client,
        &[
            "DELETE FROM ticket",
            "UPDATE evaluation_outbox SET status = 'done'",
            "INSERT INTO operation_audit (principal, op, parameters, status) VALUES ('x', 'x', '{}', 'started')",
        ],
    )
    .await;

    // The deliverer: delivers, and changes nothing but deliveries and its endpoints' health.
    let deliverer = app_as(&deliver_url);
    deliverer.deliver_all(Duration::from_secs(20)).await;
    assert_eq!(receiver.received().len(), 1);
    let client = connect(&deliver_url).await.unwrap();
    assert_refused(
        &client,
        &[
            "UPDATE evaluation_result SET department = 'sales'",
            "DELETE FROM evaluation_result",
            "UPDATE evaluation_outbox SET status = 'pending'",
            "INSERT INTO provider_call DEFAULT VALUES",
            "UPDATE ticket SET subject = 'x'",
            "DELETE FROM ticket",
            "SELECT owner FROM ticket",
            "DELETE FROM delivery",
            "UPDATE subscription SET target = 'https://elsewhere.example/hook'",
            "SELECT * FROM operation_audit",
        ],
    )
    .await;

    // The audit trail: its owner logs in never; the logins may not disable its trigger,
    // replace its function or rewrite it.
    let client = connect(&app_url).await.unwrap();
    assert_refused(
        &client,
        &[
            "ALTER TABLE operation_audit DISABLE TRIGGER operation_audit_append_only",
            "CREATE OR REPLACE FUNCTION operation_audit_append_only() RETURNS trigger \
             LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
            "UPDATE operation_audit SET principal = 'someone else'",
            "DELETE FROM operation_audit",
            "TRUNCATE operation_audit",
            "DROP TABLE operation_audit",
        ],
    )
    .await;
    let owner: String = admin
        .query_one(
            "SELECT tableowner::text FROM pg_tables WHERE tablename = 'operation_audit'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(owner, "triage_audit");
    let audit_logs_in: bool = admin
        .query_one(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = 'triage_audit'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!audit_logs_in);
}
