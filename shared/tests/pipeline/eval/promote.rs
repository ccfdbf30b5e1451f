//! The promote gate: a worse version is refused, a better one accepted, and force is audited.

use serde_json::{json, Value};

use crate::helpers::spawn_app_with_fake;

use super::{evaluate, fake_classifier, write_set};

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
    let refused = crate::helpers::operations::try_op(&app, promote("gpt-bad@medium"))
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
    crate::helpers::operations::op(&app, promote("gpt-good@medium")).await;
    // Now the good one is current: going back to the configured one is worse, unless forced.
    assert!(
        crate::helpers::operations::try_op(&app, promote("gpt-6-luna@medium"))
            .await
            .is_err()
    );
    let mut forced = promote("gpt-6-luna@medium");
    forced["force"] = json!(true);
    assert!(
        crate::helpers::operations::try_op(&app, forced.clone())
            .await
            .is_err(),
        "needs a reason"
    );
    forced["reason"] = json!("rollback during incident 42");
    crate::helpers::operations::op(&app, forced).await;
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
    let stale = crate::helpers::operations::try_op(&app, promote("gpt-good@medium"))
        .await
        .unwrap_err()
        .to_string();
    assert!(stale.contains("no eval run on the test split"), "{stale}");
}
