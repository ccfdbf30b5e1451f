use super::*;

fn answer(department: &str, urgent: f64) -> Prediction {
    Prediction {
        department: department.into(),
        is_urgent: urgent,
    }
}

/// Four rows, one family each: the large model right on rows 0, 1 and 3, the local
/// classifier right on rows 0 and 2 (sure of row 0 at 0.95, of row 1 at 0.80, of row 2 at
/// 0.50) and outside the contract on row 3. Costs 1, 2, 3, 4 cents.
fn rows() -> Vec<SweepRow> {
    let row = |i: usize, label: &str, large: &str, local: Option<(&str, f64)>| SweepRow {
        family: format!("f{i}"),
        department: label.into(),
        is_urgent: i == 0,
        large: Some(answer(large, if i == 0 { 0.9 } else { 0.1 })),
        local: local.map(|(d, c)| (answer(d, 0.2), c)),
        cost_usd: 0.01 * (i + 1) as f64,
    };
    vec![
        row(0, "billing", "billing", Some(("billing", 0.95))),
        row(1, "technical", "technical", Some(("sales", 0.80))),
        row(2, "account", "sales", Some(("account", 0.50))),
        row(3, "general", "general", None),
    ]
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-12, "{a} != {b}");
}

#[test]
fn each_threshold_takes_the_local_answer_where_it_is_sure_enough_and_pays_for_the_rest() {
    let rows = rows();
    let points = points(&rows, &[0.0, 0.5, 0.8, 0.9, 1.0], 0.8, 0.5);
    // (threshold, local rows, right rows, cost of the rows sent to the large model)
    let expected = [
        (0.0, 3, 3, 0.04),        // local 0 ✓, 1 ✗, 2 ✓; large 3 ✓
        (0.5, 3, 3, 0.04),        // 0.50 reaches 0.5
        (0.8, 2, 2, 0.03 + 0.04), // local 0 ✓, 1 ✗; large 2 ✗, 3 ✓
        (0.9, 1, 3, 0.02 + 0.03 + 0.04),
        (1.0, 0, 3, 0.10), // the large model alone
    ];
    for (point, (threshold, local, right, cost)) in points.iter().zip(expected) {
        assert_eq!(point.threshold, threshold);
        assert_eq!(point.n, 4);
        close(point.local_share, f64::from(local) / 4.0);
        close(point.department_accuracy, f64::from(right) / 4.0);
        close(point.cost_per_ticket_usd, cost / 4.0);
        close(point.cost_per_correct_usd.unwrap(), cost / f64::from(right));
        assert_eq!(point.named, threshold == 0.8, "{threshold}");
        let [low, high] = point.department_accuracy_ci.unwrap();
        assert!(low <= point.department_accuracy && point.department_accuracy <= high);
    }
    // Row 0 is the urgent one: the large model flags it (0.9), the local answer does not (0.2).
    close(points[0].urgent_recall, 0.0);
    close(points[4].urgent_recall, 1.0);
}

#[test]
fn no_right_row_has_no_cost_per_correct_and_no_rows_no_figures() {
    let mut rows = rows();
    for row in &mut rows {
        row.large = Some(answer("sales", 0.1));
        row.local = None;
    }
    rows[2].department = "billing".into();
    let point = &points(&rows, &[1.0], 1.0, 0.5)[0];
    assert_eq!(point.cost_per_correct_usd, None);
    close(point.cost_per_ticket_usd, 0.1 / 4.0);
    let empty = &points(&[], &[0.5], 0.5, 0.5)[0];
    assert_eq!(
        (empty.n, empty.local_share, empty.cost_per_ticket_usd),
        (0, 0.0, 0.0)
    );
}

#[test]
fn the_grid_runs_from_the_local_classifier_alone_to_the_large_model_alone_with_the_named_threshold()
{
    let grid = grid(0.92);
    assert_eq!(grid.first(), Some(&0.0));
    assert_eq!(grid.last(), Some(&1.0));
    assert_eq!(grid[1], 0.3);
    assert!(grid.contains(&0.92) && grid.contains(&0.9) && grid.contains(&0.95));
    assert_eq!(grid.len(), 1 + 15 + 1);
    // A named threshold on the grid is not there twice.
    assert_eq!(super::grid(0.9).len(), 16);
    assert!(grid.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn only_one_cascade_on_the_dev_split_is_swept() {
    let pair = |model: &str| VersionPair {
        prompt_version: "triage-v5".parse().unwrap(),
        model_version: model.parse().unwrap(),
    };
    let cascade = pair("cascade(local-0a1b2c,0.9,gpt-6-luna@medium)");
    let (split, swept) = check(None, std::slice::from_ref(&cascade)).unwrap();
    assert_eq!(
        (split, swept.threshold.confidence()),
        (Split::Dev, Some(0.9))
    );
    assert!(check(Some(Split::Dev), std::slice::from_ref(&cascade)).is_ok());
    let refused = check(Some(Split::Test), std::slice::from_ref(&cascade)).unwrap_err();
    assert_eq!(refused.field, "split");
    assert!(refused.reason.contains("dev"), "{refused}");
    assert!(check(None, &[pair("gpt-6-luna@medium")]).is_err());
    assert!(check(None, &[cascade.clone(), cascade]).is_err());
    assert!(check(None, &[]).is_err());
    // A target's thresholds were derived with its classifier: nothing to sweep.
    let target = pair("cascade(local-0a1b2c,p0.97,gpt-6-luna@medium)");
    assert!(check(None, &[target]).is_err());
}

#[test]
fn a_classifier_trained_on_the_sets_dev_split_is_told_from_one_that_was_not() {
    let sources = |source: &str| serde_json::json!([{"source": source, "examples": 1}]);
    let shipped = set::SHIPPED_DIGEST;
    assert!(names_set(&sources("set:shipped:dev"), shipped));
    assert!(!names_set(&sources("set:shipped:dev"), &"0".repeat(64)));
    assert!(!names_set(&sources("results:30"), shipped));
    assert!(!names_set(&sources("feedback:30"), shipped));
    assert!(!names_set(
        &sources("set:s3://bucket/set.jsonl:dev"),
        shipped
    ));
    // A file is read and hashed: the same bytes, whatever its name.
    let dir = std::env::temp_dir().join(format!("triage-names-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("copy.jsonl");
    std::fs::write(&path, b"a set").unwrap();
    let named = sources(&format!("set:{}:dev", path.display()));
    assert!(names_set(&named, &set::digest(b"a set")));
    assert!(!names_set(&named, &set::digest(b"another set")));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!names_set(&named, &set::digest(b"a set")), "gone: unknown");
    assert!(!names_set(&serde_json::json!(null), shipped));
}
