//! `triage eval` of a cascade version reports the share answered locally, the cost per ticket
//! and per correct triage, exactly; the promote gate judges a cascade like any version.

use serde_json::{json, Value};
use triage::providers::{classifier::LocalModel, PriceTable};

use super::trained;
use crate::{
    eval::{fake_classifier, waiting, write_set, EvalSet},
    helpers::operations::{op, try_op},
    helpers::{spawn_app_with_fake, TestApp},
};

pub(super) const LARGE: &str = "gpt-6-luna@medium";

/// The set's dev rows: (subject, message, department).
pub(super) fn dev_rows(set: &EvalSet) -> Vec<(String, String, String)> {
    set.text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|row| row["split"] == "dev")
        .map(|row| {
            let text = |f: &str| row[f].as_str().unwrap().to_string();
            (text("subject"), text("message"), text("department"))
        })
        .collect()
}

/// The fake classifier at 25% errors, priced so that every call costs something (the
/// two-price form: the fake's cached input costs as input, so a call's price is its text's).
pub(super) async fn app_with_prices(set: &EvalSet) -> (fake_provider::FakeProvider, TestApp) {
    let fake = fake_classifier(set).await;
    let path = set.path.to_string_lossy().to_string();
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse("gpt-6-luna=1.25/10").unwrap();
        config.quality.set = Some(path);
        config.versions.prompt = "triage-v5".parse().unwrap();
    })
    .await;
    (fake, app)
}

/// A threshold between the rows' confidences (two decimals), so both stages answer some.
pub(super) fn middle(model: &LocalModel, rows: &[(String, String, String)]) -> f64 {
    let mut confidences: Vec<f64> = rows
        .iter()
        .map(|(s, m, _)| model.predict(s, m).confidence)
        .collect();
    confidences.sort_by(f64::total_cmp);
    (confidences[confidences.len() / 2] * 100.0).floor() / 100.0
}

pub(super) fn cascade(local: &str, threshold: f64) -> String {
    format!("triage-v5/cascade({local},{threshold},{LARGE})")
}

pub(super) fn f(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

pub(super) fn close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() < 1e-9, "{what}: {a} != {b}");
}

/// cost_per_correct = what the answers cost / rows whose department is right.
fn assert_cost_per_correct(run: &Value) {
    let n = f(&run["n"]);
    let right = (f(&run["department"]["accuracy"]) * n).round();
    let cost = f(&run["cost_per_ticket_usd"]) * n;
    assert!(right > 0.0, "{run}");
    close(
        f(&run["cost_per_correct_usd"]),
        cost / right,
        "cost per correct",
    );
}

#[tokio::test]
async fn an_eval_of_a_cascade_reports_its_local_share_and_its_cost_per_ticket_and_per_correct_triage_exactly(
) {
    let set = write_set();
    let (fake, app) = app_with_prices(&set).await;
    let (local, model) = trained(&app, &set.path.to_string_lossy()).await;
    let rows = dev_rows(&set);
    let n = rows.len();
    let mid = middle(&model, &rows);
    let sure = |t: f64| {
        rows.iter()
            .filter(|(s, m, _)| model.predict(s, m).confidence >= t)
            .count()
    };
    assert!(
        sure(mid) > 0 && sure(mid) < n,
        "{mid}: {} of {n}",
        sure(mid)
    );
    assert_eq!(sure(1.0), 0, "no answer is certain");
    let versions = [
        format!("triage-v5/{LARGE}"),
        cascade(&local, 0.0),
        cascade(&local, 1.0),
        cascade(&local, mid),
    ];
    let report = waiting(
        &app,
        json!({"op": "eval", "set": set.path, "split": "dev", "versions": versions}),
    )
    .await
    .unwrap();
    assert_eq!(report["complete"], true);
    let [large, alone, never, between] = [0, 1, 2, 3].map(|i| &report["runs"][i]);
    assert_eq!(between["version"], versions[3].as_str());

    // The large model alone: nothing local, every row a paid call.
    assert_eq!(
        (f(&large["local_share"]), &large["calls"]),
        (0.0, &json!(n))
    );
    assert!(f(&large["cost_usd"]) > 0.0);
    close(
        f(&large["cost_per_ticket_usd"]),
        f(&large["cost_usd"]) / n as f64,
        "a first run's answers cost what it paid",
    );
    // Threshold 0: the classifier answers every row; no call, nothing paid, and its accuracy
    // is the classifier's own.
    assert_eq!(f(&alone["local_share"]), 1.0, "{alone}");
    assert_eq!((&alone["calls"], f(&alone["cost_usd"])), (&json!(0), 0.0));
    assert_eq!(f(&alone["cost_per_ticket_usd"]), 0.0);
    assert_eq!(f(&alone["cost_per_correct_usd"]), 0.0);
    let local_right = rows
        .iter()
        .filter(|(s, m, d)| model.predict(s, m).department == *d)
        .count();
    close(
        f(&alone["department"]["accuracy"]),
        local_right as f64 / n as f64,
        "the classifier's accuracy",
    );
    // Threshold 1: nothing local; the large model's answers (the fake errs by ticket and model,
    // and a cascade calls its large model), at the large model's cost.
    assert_eq!(f(&never["local_share"]), 0.0);
    assert_eq!(never["calls"], json!(n));
    assert_eq!(never["department"], large["department"]);
    close(
        f(&never["cost_per_ticket_usd"]),
        f(&large["cost_per_ticket_usd"]),
        "the same calls",
    );
    // In between: the share whose confidence reaches the threshold, a call for each other row.
    close(
        f(&between["local_share"]),
        sure(mid) as f64 / n as f64,
        "local share",
    );
    assert_eq!(between["calls"], json!(n - sure(mid)));
    assert!(f(&between["cost_per_ticket_usd"]) < f(&large["cost_per_ticket_usd"]));
    for run in [large, never, between] {
        assert_cost_per_correct(run);
    }
    assert_eq!(fake.billed_calls().len(), n + n + (n - sure(mid)));
    let local_results = app
        .count("SELECT count(*) FROM evaluation_result WHERE answered_by = 'local'")
        .await;
    assert_eq!(local_results as usize, n + sure(mid));

    // Stored with them: the list and the Quality page show the share and the cost per correct.
    let listed = op(&app, json!({"op": "eval", "list": true})).await;
    let stored = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["figures"]["version"] == versions[3].as_str())
        .expect("the cascade's run is listed");
    assert_eq!(stored["figures"]["local_share"], between["local_share"]);
    // Summed in another order where it is stored: equal to the last bits.
    close(
        f(&stored["figures"]["cost_per_correct_usd"]),
        f(&between["cost_per_correct_usd"]),
        "the stored cost per correct triage",
    );
    let digest = report["set"]["digest"].as_str().unwrap();
    let page =
        crate::console::console_page(&app, &format!("/admin/quality?set={digest}&split=dev")).await;
    assert!(
        page.contains(&format!(
            r#"data-figure="local_share/{}">{:.3}<"#,
            versions[3],
            f(&between["local_share"])
        )),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            r#"data-figure="cost_per_correct/{}">${:.6}<"#,
            versions[3],
            f(&between["cost_per_correct_usd"])
        )),
        "{page}"
    );
}

#[tokio::test]
async fn promote_judges_a_cascade_like_any_version_after_an_eval_run_of_it() {
    let set = write_set();
    let (_fake, app) = app_with_prices(&set).await;
    let (local, _) = trained(&app, &set.path.to_string_lossy()).await;
    let candidate = format!("cascade({local},1,{LARGE})");
    let promote =
        json!({"op": "promote", "prompt_version": "triage-v5", "model_version": candidate});
    // The current version's run alone: the candidate has none, and is refused.
    waiting(
        &app,
        json!({"op": "eval", "set": set.path, "split": "test", "versions": ["triage-v5"]}),
    )
    .await
    .unwrap();
    let refused = try_op(&app, promote.clone()).await.unwrap_err().to_string();
    assert!(refused.contains("no run"), "{refused}");
    assert!(refused.contains(&candidate), "{refused}");

    // Evaluated on test, no worse: the gate passes without --force.
    let report = waiting(
        &app,
        json!({"op": "eval", "set": set.path, "split": "test",
               "versions": [format!("triage-v5/{candidate}")]}),
    )
    .await
    .unwrap();
    assert_eq!(report["complete"], true);
    let promoted = op(&app, promote).await;
    assert_eq!(promoted["model_version"], candidate.as_str(), "{promoted}");
    assert_eq!(
        app.count("SELECT count(*) FROM operation_audit WHERE op = 'promote' AND status = 'ok'")
            .await,
        1
    );
    let gated: Value = app
        .row("SELECT parameters FROM operation_audit WHERE op = 'promote' AND status = 'ok'")
        .await
        .get(0);
    assert_eq!(gated["force"], false, "{gated}");
}
