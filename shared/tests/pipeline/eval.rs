//! `triage eval` and the promote gate on real PostgreSQL, with the fake provider's
//! classifier mode answering from the set's labels at a known error rate (docs/quality.md).

use std::{path::Path, time::Duration};

use fake_provider::{
    classifier::{answered, Classifier, Label, NOT_URGENT_P, URGENT_P},
    FakeProvider,
};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use triage::{
    operations,
    pipeline::worker,
    quality::{self, Watch},
};

use crate::helpers::{spawn_app_with_fake, TestApp};

const DEPARTMENTS: [&str; 5] = ["billing", "technical", "account", "sales", "general"];
/// The configured model of `use_fake`, as the fake sees it in a request.
const MODEL: &str = "gpt-6-luna";
const RATE: f64 = 0.25;

/// 60 labelled rows, every department and both urgencies, half in each split; 20 scenario
/// families of 3 rows (rows i, i + 20, i + 40: one label, one split).
fn labelled_set() -> String {
    (0..60)
        .map(|i| {
            json!({
                "id": format!("t{i}"),
                "subject": format!("Ticket {i} about {}", DEPARTMENTS[i % 5]),
                "message": format!("Message number {i}: please look at this ({}).", i * 7 % 11),
                "department": DEPARTMENTS[i % 5],
                "is_urgent": i % 3 == 0,
                "split": if i % 2 == 0 { "test" } else { "dev" },
                "family": format!("f{}", i % 20),
            })
            .to_string()
                + "\n"
        })
        .collect()
}

pub struct EvalSet {
    _dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
    pub text: String,
}

pub fn write_set() -> EvalSet {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("set.jsonl");
    let text = labelled_set();
    std::fs::write(&path, &text).unwrap();
    EvalSet {
        _dir: dir,
        path,
        text,
    }
}

pub async fn fake_classifier(set: &EvalSet) -> FakeProvider {
    let fake = FakeProvider::start().await;
    let classifier = Classifier::from_jsonl(&set.text, RATE)
        .unwrap()
        .with_rate("gpt-good", 0.02)
        .with_rate("gpt-bad", 0.45)
        // A little worse than the configured model's 0.25: on 10 families, noise.
        .with_rate("gpt-noisy", 0.28);
    fake.classify_from_labels(classifier);
    fake
}

/// `triage eval` as the CLI runs it: the operation waits while a worker answers.
pub async fn evaluate(app: &TestApp, set: &Path, split: &str, versions: &[&str]) -> Value {
    let payload = json!({"op": "eval", "set": set, "split": split, "versions": versions});
    waiting(app, payload).await.expect("eval succeeds")
}

/// An operation as the CLI runs `triage eval`: it waits while a worker answers its jobs.
pub async fn waiting(app: &TestApp, payload: Value) -> triage::Result<Value> {
    let request: operations::Request = serde_json::from_value(payload).unwrap();
    let working = CancellationToken::new();
    let watch = Watch {
        wait: true,
        stop: CancellationToken::new(),
        progress: None,
    };
    let operator = operations::Operator::os_user();
    let w = app.worker();
    let evaluation = async {
        let outcome =
            operations::run_with(&app.pool, &app.config, request, &operator, &watch).await;
        working.cancel();
        outcome
    };
    let (outcome, worked) = tokio::join!(
        evaluation,
        worker::run_until_stopped(&w, Duration::from_millis(20), working.clone())
    );
    worked.unwrap();
    Ok(serde_json::to_value(outcome?).unwrap())
}

/// What the fake will answer for each test row: (label, answered department, answered urgent).
fn expected(set: &EvalSet, model: &str, rate: f64) -> Vec<(Label, String, bool)> {
    set.text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|row| row["split"] == "test")
        .map(|row| {
            let label = Label {
                department: row["department"].as_str().unwrap().into(),
                is_urgent: row["is_urgent"].as_bool().unwrap(),
            };
            let (subject, message) = (
                row["subject"].as_str().unwrap(),
                row["message"].as_str().unwrap(),
            );
            let (department, urgent) = answered(&label, subject, message, model, rate);
            (label, department, urgent)
        })
        .collect()
}

#[tokio::test]
async fn eval_reports_exact_figures_for_the_fake_classifier_and_a_second_run_makes_no_call() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let report = evaluate(&app, &set.path, "test", &["triage-v5"]).await;

    let rows = expected(&set, MODEL, RATE);
    let n = rows.len();
    assert_eq!(n, 30);
    let correct = rows.iter().filter(|(l, d, _)| l.department == *d).count();
    assert!(
        correct > 15 && correct < n,
        "the rate makes some errors: {correct}/{n}"
    );
    let run = &report["runs"][0];
    assert_eq!(report["complete"], true);
    assert_eq!(report["set"]["rows"], 30);
    assert_eq!(run["version"], "triage-v5/gpt-6-luna@medium");
    assert_eq!(
        (run["n"].as_u64(), run["calls"].as_i64()),
        (Some(30), Some(30))
    );
    assert_eq!(
        run["department"]["accuracy"].as_f64().unwrap(),
        correct as f64 / n as f64
    );
    // The confusion matrix, cell by cell.
    for label in DEPARTMENTS {
        for answer in DEPARTMENTS {
            let want = rows
                .iter()
                .filter(|(l, d, _)| l.department == label && d == answer)
                .count() as u64;
            let got = run["department"]["confusion"][label][answer]
                .as_u64()
                .unwrap_or(0);
            assert_eq!(got, want, "{label} → {answer}");
        }
    }
    // Per class, for billing: precision and recall by hand.
    let said_billing = rows.iter().filter(|(_, d, _)| d == "billing").count();
    let billing_right = rows
        .iter()
        .filter(|(l, d, _)| d == "billing" && l.department == "billing")
        .count();
    let billing = &run["department"]["per_class"]["billing"];
    assert_eq!(
        billing["precision"].as_f64().unwrap(),
        billing_right as f64 / said_billing as f64
    );
    assert_eq!(billing["support"], 6);
    // Urgency at the policy's threshold, and the Brier score of 0.9 / 0.1 answers.
    let urgent = rows.iter().filter(|(l, _, _)| l.is_urgent).count();
    let caught = rows.iter().filter(|(l, _, u)| l.is_urgent && *u).count();
    let flagged = rows.iter().filter(|(_, _, u)| *u).count();
    assert_eq!(
        run["urgent"]["recall"].as_f64().unwrap(),
        caught as f64 / urgent as f64
    );
    assert_eq!(
        run["urgent"]["precision"].as_f64().unwrap(),
        caught as f64 / flagged as f64
    );
    let brier: f64 = rows
        .iter()
        .map(|(l, _, u)| {
            let p = if *u { URGENT_P } else { NOT_URGENT_P };
            (p - f64::from(u8::from(l.is_urgent))).powi(2)
        })
        .sum::<f64>()
        / n as f64;
    assert!((run["urgent"]["brier"].as_f64().unwrap() - brier).abs() < 1e-12);
    assert_eq!(fake.billed_calls().len(), 30);
    assert_eq!(
        app.count("SELECT count(*) FROM eval_run WHERE split = 'test'")
            .await,
        1
    );

    // The same version over the same set again: every answer is stored, no call is made.
    let again = evaluate(&app, &set.path, "test", &["triage-v5"]).await;
    assert_eq!(fake.calls().len(), 30, "no provider call the second time");
    assert_eq!(again["runs"][0]["calls"], 0);
    assert_eq!(again["runs"][0]["cost_usd"], 0.0);
    assert_eq!(again["runs"][0]["department"], run["department"]);
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call WHERE workload = 'eval' AND lane = 'bulk'")
            .await,
        30
    );
    let listed = crate::operations::op(&app, json!({"op": "eval", "list": true})).await;
    assert_eq!(listed["runs"].as_array().unwrap().len(), 2);
    assert_eq!(listed["running"], json!([]), "both concluded");
}

#[tokio::test]
async fn eval_work_is_absent_from_stats_the_age_metric_and_the_queue_counts() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    // The ops Lambda's way (here from the CLI, which alone reads a file): queue and report,
    // without waiting for the fleet.
    let queued =
        crate::operations::op_cli(&app, json!({"op": "eval", "set": set.path, "split": "dev"}))
            .await;
    assert_eq!(queued["complete"], false);
    assert_eq!(queued["runs"][0]["answered"], 0);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE workload = 'eval' AND status = 'pending'"
        )
        .await,
        30
    );
    // Jobs old enough to raise the age alarm if they counted.
    app.exec("UPDATE evaluation_outbox SET available_at = now() - interval '1 hour'")
        .await;
    let stats = crate::operations::op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["pending"], 0, "{stats}");
    assert_eq!(stats["oldest_pending_age_seconds"], 0.0);

    // A production ticket beside them is counted, alone.
    app.post_ticket("Production", "a real customer").await;
    let stats = crate::operations::op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["pending"], 1);
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    let stats = crate::operations::op(&app, json!({"op": "stats"})).await;
    assert_eq!(
        (stats["done"].as_i64(), stats["billed_calls"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(stats["pending"], 0);
    assert_eq!(
        fake.billed_calls().len(),
        31,
        "the eval jobs were answered too"
    );
    // The console's overview reads the same report.
    let health = triage::pipeline::reads::report::health(
        &app.pool,
        triage::pipeline::outbox::claim::Serves::Models,
        None,
    )
    .await
    .unwrap();
    assert_eq!((health.done, health.billed_calls), (1, 1));
}

#[tokio::test]
async fn promote_refuses_a_worse_version_accepts_a_better_one_and_force_is_audited() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let path = set.path.to_string_lossy().to_string();
    let app = spawn_app_with_fake(&fake, |config| {
        config.quality.set = Some(path);
        config.versions.prompt = "triage-v5".parse().unwrap();
    })
    .await;
    let versions = [
        "triage-v5",
        "triage-v5/gpt-good@medium",
        "triage-v5/gpt-bad@medium",
    ];
    let report = evaluate(&app, &set.path, "test", &versions).await;
    let f1 = |i: usize| {
        report["runs"][i]["department"]["macro_f1"]
            .as_f64()
            .unwrap()
    };
    assert!(
        f1(1) > f1(0) + 0.01 && f1(2) < f1(0) - 0.01,
        "{}",
        report["runs"]
    );
    assert_eq!(report["comparison"].as_array().unwrap().len(), 2);

    let promote = |model: &str| json!({"op": "promote", "prompt_version": "triage-v5", "model_version": model});
    let refused = crate::operations::try_op(&app, promote("gpt-bad@medium"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("worse than the current version"),
        "{refused}"
    );
    assert!(
        refused.contains("triage-v5/gpt-6-luna@medium: macro-F1"),
        "both figures: {refused}"
    );
    crate::operations::op(&app, promote("gpt-good@medium")).await;
    // Now the good one is current: going back to the configured one is worse, unless forced.
    assert!(
        crate::operations::try_op(&app, promote("gpt-6-luna@medium"))
            .await
            .is_err()
    );
    let mut forced = promote("gpt-6-luna@medium");
    forced["force"] = json!(true);
    assert!(
        crate::operations::try_op(&app, forced.clone())
            .await
            .is_err(),
        "needs a reason"
    );
    forced["reason"] = json!("rollback during incident 42");
    crate::operations::op(&app, forced).await;
    let audit = app
        .row("SELECT parameters, status FROM operation_audit WHERE op = 'promote' ORDER BY id DESC LIMIT 1")
        .await;
    let parameters: Value = audit.get(0);
    assert_eq!(
        (
            &parameters["force"],
            &parameters["reason"],
            audit.get::<_, String>(1).as_str()
        ),
        (&json!(true), &json!("rollback during incident 42"), "ok")
    );
    assert_eq!(
        app.count("SELECT count(*) FROM operation_audit WHERE op = 'promote' AND status <> 'ok'")
            .await,
        3,
        "refusals are audited too"
    );

    // The set changed (one more row): the runs were on another digest and do not count.
    std::fs::write(
        &set.path,
        set.text.clone()
            + &set
                .text
                .lines()
                .next()
                .unwrap()
                .replace("\"t0\"", "\"t999\"")
            + "\n",
    )
    .unwrap();
    let stale = crate::operations::try_op(&app, promote("gpt-good@medium"))
        .await
        .unwrap_err()
        .to_string();
    assert!(stale.contains("no eval run on the test split"), "{stale}");
}

#[tokio::test]
async fn a_stopped_eval_stores_nothing_and_a_rerun_continues_without_paying_twice() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    fake.set_default(fake_provider::Behavior::Classify.after(Duration::from_millis(100)));
    let app = spawn_app_with_fake(&fake, |config| config.worker.concurrency = 2).await;
    let request: operations::Request =
        serde_json::from_value(json!({"op": "eval", "set": set.path, "split": "test"})).unwrap();
    let stop = CancellationToken::new();
    // Ctrl-C once the first answers are in.
    let tell = {
        let stop = stop.clone();
        std::sync::Arc::new(move |p: &quality::Progress| {
            if p.answered >= 4 {
                stop.cancel();
            }
        })
    };
    let watch = Watch {
        wait: true,
        stop: stop.clone(),
        progress: Some(tell),
    };
    let operator = operations::Operator::os_user();
    let w = app.worker();
    let (outcome, worked) = tokio::join!(
        operations::run_with(&app.pool, &app.config, request, &operator, &watch),
        worker::run_until_stopped(&w, Duration::from_millis(20), stop.clone())
    );
    worked.unwrap();
    let stopped = serde_json::to_value(outcome.unwrap()).unwrap();
    assert_eq!(stopped["complete"], false);
    let answered = stopped["runs"][0]["answered"].as_u64().unwrap();
    assert!((4..30).contains(&answered), "stopped part way: {answered}");
    assert_eq!(
        app.count("SELECT count(*) FROM eval_run").await,
        0,
        "nothing stored"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'processing'")
            .await,
        0,
        "in-flight calls finished and were written"
    );

    let resumed = evaluate(&app, &set.path, "test", &["triage-v3"]).await;
    assert_eq!(resumed["complete"], true);
    let resumed_calls = resumed["runs"][0]["calls"].as_i64().unwrap();
    assert_eq!(app.count("SELECT count(*) FROM eval_run").await, 1);
    assert_eq!(
        fake.billed_calls().len(),
        30,
        "every content paid once, across both runs"
    );
    // The rerun continued the stopped run: one run, whose calls are all the run's, each once.
    assert_eq!(resumed["run_id"], stopped["run_id"]);
    assert_eq!(resumed_calls, 30);
    assert!(fake.billed_by_content().values().all(|n| *n == 1));
}

/// The ops Lambda's way end to end: the request returns at once, the fleet answers, and the
/// sweeper's tick concludes the run (stored once, however many ticks see it complete).
#[tokio::test]
async fn an_eval_nobody_waits_for_is_concluded_by_the_sweepers_tick_once() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let queued = crate::operations::op_cli(
        &app,
        json!({"op": "eval", "set": set.path, "split": "test", "versions": ["triage-v5"]}),
    )
    .await;
    assert_eq!(queued["complete"], false);
    let sweeper =
        triage::pipeline::sweep::Sweeper::new(app.pool.clone(), app.config.clone()).unwrap();
    let tick = || operations::sweep(&sweeper, std::time::Instant::now() + Duration::from_secs(5));
    tick().await.unwrap();
    assert_eq!(
        app.count("SELECT count(*) FROM eval_run").await,
        0,
        "not answered yet"
    );
    let listed = crate::operations::op(&app, json!({"op": "eval", "list": true})).await;
    assert_eq!(listed["running"][0]["run_id"], queued["run_id"]);
    assert_eq!(listed["running"][0]["progress"]["total"], 30);

    app.drain(&app.worker(), Duration::from_secs(20)).await;
    tick().await.unwrap();
    tick().await.unwrap();
    assert_eq!(
        app.count("SELECT count(*) FROM eval_run").await,
        1,
        "stored once"
    );
    let listed = crate::operations::op(&app, json!({"op": "eval", "list": true})).await;
    assert_eq!(listed["running"], json!([]));
    assert_eq!(listed["runs"][0]["n"], 30);
}

/// `triage eval` on a laptop pointed at production (an SSM tunnel) answers its own jobs only.
#[tokio::test]
async fn triage_evals_own_workers_leave_production_tickets_to_the_fleet() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    assert_eq!(
        app.post_ticket("Production", "a customer waits")
            .await
            .status,
        201
    );
    crate::operations::op_cli(
        &app,
        json!({"op": "eval", "set": set.path, "split": "test"}),
    )
    .await;
    let eval_worker = app.worker().eval_only();
    app.run_worker_once(&eval_worker).await;
    app.run_worker_once(&eval_worker).await;
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE workload = 'eval' AND status = 'done'"
        )
        .await,
        30
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE workload = 'production' AND status = 'pending' AND attempts = 0").await,
        1,
        "left untouched: {:?}",
        app.status_counts().await
    );
}

/// Intervals by family, the offline baseline beside every run, and a gate that tells a loss
/// beyond noise from noise (docs/quality.md, "Reading the figures" and the gate).
#[tokio::test]
async fn runs_carry_families_and_intervals_the_baseline_is_shown_and_noise_is_no_significant_difference(
) {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let path = set.path.to_string_lossy().to_string();
    let app = spawn_app_with_fake(&fake, |config| {
        config.quality.set = Some(path);
        config.versions.prompt = "triage-v5".parse().unwrap();
    })
    .await;
    let versions = ["triage-v5", "triage-v5/gpt-noisy@medium"];
    let report = evaluate(&app, &set.path, "test", &versions).await;

    // n is rows and families; accuracy carries its interval over families.
    for run in report["runs"].as_array().unwrap() {
        assert_eq!(
            (run["n"].as_u64(), run["families"].as_u64()),
            (Some(30), Some(10))
        );
        let accuracy = run["department"]["accuracy"].as_f64().unwrap();
        let ci: Vec<f64> = run["department"]["accuracy_ci"]
            .as_array()
            .unwrap_or_else(|| panic!("accuracy_ci: {run}"))
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!(
            ci.len() == 2 && ci[0] <= accuracy && accuracy <= ci[1] && ci[0] < ci[1],
            "{ci:?} around {accuracy}"
        );
        assert!(run["urgent"]["recall_ci95"]["low"].is_number(), "{run}");
    }
    // The offline baseline, answered in-process: no job, no call.
    let baseline = &report["baseline"];
    assert_eq!(baseline["version"], "rules@offline (baseline)", "{report}");
    assert_eq!(
        (baseline["n"].as_u64(), baseline["families"].as_u64()),
        (Some(30), Some(10))
    );
    assert_eq!(
        (&baseline["answered"], &baseline["calls"]),
        (&json!(30), &json!(0))
    );
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call").await,
        60,
        "two versions' calls, none for the baseline"
    );
    // The rules find "billing" and "account" in these subjects and nothing else (general),
    // and no urgent word: 18 of 30 right, no urgent row caught.
    assert_eq!(baseline["department"]["accuracy"], json!(0.6));
    assert_eq!(baseline["urgent"]["recall"], json!(0.0));
    assert!(baseline["department"]["accuracy_ci"][0].as_f64().unwrap() < 0.6);
    // A run that asks for the rules classifier itself does not show it twice.
    let rules = crate::operations::op_cli(
        &app,
        json!({"op": "eval", "set": set.path, "split": "test", "versions": ["triage-v5/rules@offline"]}),
    )
    .await;
    assert_eq!(rules["baseline"], Value::Null, "not duplicated: {rules}");

    // gpt-noisy is worse than the current version by more than the tolerance, by noise: the
    // paired test over the 10 shared families finds no significant difference.
    let f1 = |i: usize| {
        report["runs"][i]["department"]["macro_f1"]
            .as_f64()
            .unwrap()
    };
    assert!(f1(1) + 0.01 < f1(0), "{} vs {}", f1(1), f1(0));
    let noisy = triage::domain::versions::VersionPair {
        prompt_version: "triage-v5".parse().unwrap(),
        model_version: triage::domain::versions::ModelVersion::new("gpt-noisy", "medium").unwrap(),
    };
    let note = operations::promote::quality_gate(&app.pool, &app.config, &noisy)
        .await
        .expect("noise passes")
        .expect("and says so");
    assert!(
        note.contains("no significant difference") && note.contains("paired over 10 families"),
        "{note}"
    );
    // The operator reads it in the promotion's answer.
    let promoted = crate::operations::op(
        &app,
        json!({"op": "promote", "prompt_version": "triage-v5", "model_version": "gpt-noisy@medium"}),
    )
    .await;
    assert_eq!(promoted["gate"], note.as_str(), "{promoted}");

    // The Quality page shows the baseline beside the versions, and the intervals by family.
    let page = crate::console::console_page(&app, "/admin/quality").await;
    assert!(page.contains("rules@offline (baseline)"), "{page}");
    assert!(
        page.contains(r#"data-figure="n/baseline">30 / 10<"#),
        "{page}"
    );
    let [low, high] = [0, 1].map(|i| baseline["department"]["accuracy_ci"][i].as_f64().unwrap());
    assert!(
        page.contains(&format!(
            r#"data-figure="accuracy/baseline">{:.3} [{low:.3}, {high:.3}]<"#,
            baseline["department"]["accuracy"].as_f64().unwrap()
        )),
        "{page}"
    );
}
