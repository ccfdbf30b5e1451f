//! What an eval reports: exact figures for the fake classifier (a second run makes no call),
//! and runs carrying families and intervals, the baseline shown, noise no significant
//! difference.

use fake_provider::classifier::{answered, Label, NOT_URGENT_P, URGENT_P};
use serde_json::{json, Value};
use triage::operations;

use crate::helpers::spawn_app_with_fake;

use super::{evaluate, fake_classifier, write_set, EvalSet, DEPARTMENTS, MODEL, RATE};

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
            let departments = fake_provider::DEPARTMENTS.map(String::from);
            let ticket = (subject, message);
            let (department, urgent) = answered(&label, ticket, model, rate, &departments);
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
    let listed = crate::helpers::operations::op(&app, json!({"op": "eval", "list": true})).await;
    assert_eq!(listed["runs"].as_array().unwrap().len(), 2);
    assert_eq!(listed["running"], json!([]), "both concluded");
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
    let rules = crate::helpers::operations::op_cli(
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
    let policy = triage::providers::Policy::load("policy-v1").unwrap();
    let note = operations::promote::quality_gate(&app.pool, &app.config, &noisy, &policy)
        .await
        .expect("noise passes")
        .expect("and says so");
    assert!(
        note.contains("no significant difference") && note.contains("paired over 10 families"),
        "{note}"
    );
    // The operator reads it in the promotion's answer.
    let promoted = crate::helpers::operations::op(
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
