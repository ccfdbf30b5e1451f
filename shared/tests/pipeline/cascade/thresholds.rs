//! `triage eval --thresholds` sweeps a cascade's threshold on the dev split, each point equal
//! to an eval run of the cascade at that threshold, stored and drawn on the Quality page; it is
//! refused on test and for anything but one cascade.

use serde_json::{json, Value};

use super::{
    eval::{app_with_prices, cascade, close, dev_rows, f, middle, LARGE},
    trained,
};
use crate::{
    eval::{waiting, write_set},
    helpers::operations::try_op_cli,
};

/// Two lists of points alike, numbers to 1e-9 (jsonb keeps decimals; JSON's reader may round
/// the last digit).
fn same_points(a: &Value, b: &Value) {
    let (a, b) = (a.as_array().unwrap(), b.as_array().unwrap());
    assert_eq!(a.len(), b.len());
    for (a, b) in a.iter().zip(b) {
        let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (key, value) in a {
            match (value, &b[key]) {
                (Value::Number(x), Value::Number(y)) => {
                    close(x.as_f64().unwrap(), y.as_f64().unwrap(), key)
                }
                (Value::Array(x), Value::Array(y)) => {
                    for (x, y) in x.iter().zip(y) {
                        close(f(x), f(y), key);
                    }
                }
                (x, y) => assert_eq!(x, y, "{key}"),
            }
        }
    }
}

#[tokio::test]
async fn a_threshold_sweep_on_dev_gives_at_each_threshold_what_an_eval_of_the_cascade_there_reports_and_the_quality_page_draws_it(
) {
    let set = write_set();
    let (fake, app) = app_with_prices(&set).await;
    let (local, model) = trained(&app, &set.path.to_string_lossy()).await;
    let rows = dev_rows(&set);
    let n = rows.len();
    let mid = middle(&model, &rows);
    let swept = cascade(&local, mid);
    let sweep = waiting(
        &app,
        json!({"op": "eval", "set": set.path, "thresholds": true, "versions": [swept]}),
    )
    .await
    .unwrap();
    assert_eq!(sweep["complete"], true, "{sweep}");
    assert_eq!(sweep["version"], swept.as_str());
    assert_eq!(sweep["set"]["split"], "dev");
    assert_eq!(sweep["set"]["rows"], n);
    assert_eq!(
        sweep["learnt_these_rows"], true,
        "the classifier learnt these dev rows, and the sweep says so"
    );
    // One eval run of the large model over dev: a call per row.
    assert_eq!(sweep["large"]["version"], format!("triage-v5/{LARGE}"));
    assert_eq!(sweep["large"]["calls"], n);
    assert_eq!(fake.billed_calls().len(), n);
    let points = sweep["points"].as_array().unwrap();
    let at = |t: f64| {
        points
            .iter()
            .find(|p| f(&p["threshold"]) == t)
            .unwrap_or_else(|| panic!("no point at {t}: {sweep}"))
    };
    assert_eq!(at(mid)["named"], true);
    assert_eq!(points.iter().filter(|p| p["named"] == true).count(), 1);
    assert_eq!(f(&at(0.0)["local_share"]), 1.0);
    assert_eq!(f(&at(0.0)["cost_per_ticket_usd"]), 0.0);
    assert_eq!(f(&at(1.0)["local_share"]), 0.0);
    close(
        f(&at(1.0)["department_accuracy"]),
        f(&sweep["large"]["department_accuracy"]),
        "at 1 the large model alone",
    );
    close(
        f(&at(1.0)["cost_per_ticket_usd"]),
        f(&sweep["large"]["cost_per_ticket_usd"]),
        "and its cost",
    );
    for point in points {
        let t = f(&point["threshold"]);
        let sure = rows
            .iter()
            .filter(|(s, m, _)| model.predict(s, m).confidence >= t)
            .count();
        close(
            f(&point["local_share"]),
            sure as f64 / n as f64,
            &format!("local share at {t}"),
        );
    }

    // Each point is what an eval run of the cascade at that threshold reports.
    let mut thresholds = vec![0.0, 0.5, mid, 1.0];
    thresholds.dedup();
    let versions: Vec<String> = thresholds.iter().map(|&t| cascade(&local, t)).collect();
    let report = waiting(
        &app,
        json!({"op": "eval", "set": set.path, "split": "dev", "versions": versions}),
    )
    .await
    .unwrap();
    for (i, &t) in thresholds.iter().enumerate() {
        let (run, point) = (&report["runs"][i], at(t));
        let what = |figure: &str| format!("{figure} at {t}");
        close(
            f(&point["local_share"]),
            f(&run["local_share"]),
            &what("local share"),
        );
        close(
            f(&point["department_accuracy"]),
            f(&run["department"]["accuracy"]),
            &what("accuracy"),
        );
        assert_eq!(
            point["department_accuracy_ci"],
            run["department"]["accuracy_ci"],
            "{}",
            what("interval")
        );
        close(
            f(&point["urgent_recall"]),
            f(&run["urgent"]["recall"]),
            &what("urgent recall"),
        );
        close(
            f(&point["cost_per_ticket_usd"]),
            f(&run["cost_per_ticket_usd"]),
            &what("cost per ticket"),
        );
        close(
            f(&point["cost_per_correct_usd"]),
            f(&run["cost_per_correct_usd"]),
            &what("cost per correct"),
        );
    }

    // Stored; a second sweep makes no call and is stored beside it.
    let stored: Value = app
        .row("SELECT points FROM threshold_sweep ORDER BY id LIMIT 1")
        .await
        .get(0);
    same_points(&stored, &sweep["points"]);
    let billed = fake.billed_calls().len();
    let again = waiting(
        &app,
        json!({"op": "eval", "set": set.path, "split": "dev", "thresholds": true, "versions": [swept]}),
    )
    .await
    .unwrap();
    assert_eq!(
        (&again["large"]["calls"], &again["points"]),
        (&json!(0), &sweep["points"])
    );
    assert_eq!(fake.billed_calls().len(), billed);
    assert_eq!(app.count("SELECT count(*) FROM threshold_sweep").await, 2);

    // The Quality page draws the newest sweep of the cascade and lists its points.
    let page = crate::console::console_page(&app, "/admin/quality").await;
    assert!(page.contains(&format!(r#"data-sweep="{swept}""#)), "{page}");
    assert_eq!(page.matches("data-sweep=").count(), 1, "the newest only");
    for point in points {
        let t = f(&point["threshold"]);
        assert!(
            page.contains(&format!(r#"data-dot="{t:.2}""#)),
            "point {t} drawn: {page}"
        );
        let row = page
            .split(&format!(r#"data-point="{swept}@{t:.2}""#))
            .nth(1)
            .unwrap_or_else(|| panic!("point {t} listed: {page}"));
        let row = row.split("</tr>").next().unwrap();
        assert!(
            row.contains(&format!(
                r#"data-stat="local_share">{:.3}<"#,
                f(&point["local_share"])
            )),
            "{row}"
        );
        assert!(
            row.contains(&format!(
                r#"data-stat="department_accuracy">{:.3} ["#,
                f(&point["department_accuracy"])
            )),
            "{row}"
        );
    }
    // The large model alone is the dashed level.
    assert!(page.contains(&format!(
        r#"data-reference="{:.3}""#,
        f(&at(1.0)["department_accuracy"])
    )));
}

#[tokio::test]
async fn thresholds_are_chosen_on_dev_only_and_for_a_cascade_only() {
    let set = write_set();
    let (_fake, app) = app_with_prices(&set).await;
    let (local, _) = trained(&app, &set.path.to_string_lossy()).await;
    let refusals = [
        (
            json!({"split": "test", "versions": [cascade(&local, 0.9)]}),
            "split",
        ),
        (
            json!({"versions": [format!("triage-v5/{LARGE}")]}),
            "version",
        ),
        (
            json!({"versions": [cascade(&local, 0.9), cascade(&local, 0.8)]}),
            "version",
        ),
        (
            json!({"versions": ["triage-v5/cascade(local-0123456789ab,0.9,gpt-6-luna@medium)"]}),
            "model_version",
        ),
    ];
    for (fields, field) in refusals {
        let mut payload = json!({"op": "eval", "set": set.path, "thresholds": true});
        payload
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        match try_op_cli(&app, payload.clone()).await {
            Err(triage::Error::InvalidRequest(e)) => {
                assert_eq!(e.field, field, "{payload}: {e}");
                if field == "split" {
                    assert!(e.reason.contains("chosen on dev"), "{e}");
                }
            }
            other => panic!("{payload}: {other:?}"),
        }
    }
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox").await,
        0,
        "nothing queued"
    );
    assert_eq!(app.count("SELECT count(*) FROM eval_request").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM threshold_sweep").await, 0);
    // And a flag: --thresholds parses as the payload's field.
    let parsed: triage::operations::Request =
        serde_json::from_value(json!({"op": "eval", "set": "shipped", "thresholds": true}))
            .unwrap();
    assert!(matches!(
        parsed,
        triage::operations::Request::Eval {
            thresholds: true,
            ..
        }
    ));
}
