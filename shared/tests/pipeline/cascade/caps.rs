//! The caps on who makes up a training set (docs/labelling.md): each ticket owner's share of a
//! source, never cut below a floor of rows, and each label giver's share of the weight.

use serde_json::json;
use triage::pipeline::cascade::caps::FLOOR_ROWS;

use crate::helpers::{operations::op, spawn_app, TestApp};

/// `n` production tickets of `owner` (as stored: a digest) the configured model answered in
/// the last hour, each its own text (`tag` and its number) naming its department, the policy's
/// first five in turn, the newest first by number.
pub(crate) async fn answered_tickets(app: &TestApp, owner: &str, tag: &str, n: usize) {
    let versions = &app.config.versions;
    app.exec(&format!(
        "WITH g AS (SELECT gen_random_uuid() AS id, i,
                           (ARRAY['billing', 'technical', 'account', 'sales', 'general'])[1 + i % 5]
                               AS department
                    FROM generate_series(1, {n}) AS i),
         t AS (INSERT INTO ticket (id, subject, message, owner)
               SELECT id, '{tag} ' || i, department || ' question ' || i, '{owner}' FROM g
               RETURNING id),
         te AS (INSERT INTO ticket_evaluation (ticket_id, idempotency_key, prompt_version,
                                               model_version)
                SELECT id, md5(id::text), '{prompt}', '{model}' FROM t)
         INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department,
                                        urgency_score, model_version, prompt_version,
                                        policy_version, computed_at)
         SELECT md5(g.id::text), g.id, CASE WHEN i % 4 = 0 THEN 0.9 ELSE 0.1 END, department,
                0.1, '{model}', '{prompt}', 'policy-v1', now() - make_interval(secs => i)
         FROM g JOIN t USING (id)",
        prompt = versions.prompt.as_str(),
        model = versions.model.as_str(),
    ))
    .await;
}

#[tokio::test]
async fn a_desk_beside_a_smoke_tests_one_ticket_trains_on_all_it_has() {
    let app = spawn_app().await;
    answered_tickets(&app, "desk", "desk", FLOOR_ROWS as usize).await;
    answered_tickets(&app, "smoke", "deploy smoke test", 1).await;
    // An equal share of two owners was one row each: 2 examples.
    let trained = op(&app, json!({"op": "train", "from": ["results:1"]})).await;
    assert_eq!(trained["examples"], FLOOR_ROWS + 1, "{trained}");
    let source = &trained["provenance"][0];
    assert_eq!(source["owner_cap"], json!(null));
    assert_eq!(source["owner_capped"], json!({}));
    assert_eq!(trained["sources"][0]["left_out"]["owner_cap"], 0);

    // Beyond the floor, the cap bites and the report says whom, and by how much.
    answered_tickets(&app, "desk", "more desk", 500).await;
    let trained = op(&app, json!({"op": "train", "from": ["results:1"]})).await;
    assert_eq!(trained["examples"], FLOOR_ROWS + 1, "{trained}");
    let source = &trained["provenance"][0];
    assert_eq!(source["owner_cap"], FLOOR_ROWS);
    assert_eq!(source["owner_capped"], json!({"desk": 500}));
    assert_eq!(trained["sources"][0]["left_out"]["owner_cap"], 500);
}

/// `giver`'s current labels (a labeller's, replacing any) of the `n` newest tickets `tag`
/// names (its subject, or its subject's first word), each with the model's department
/// (`None`) or `department`.
pub(crate) async fn labelled(
    app: &TestApp,
    giver: &str,
    tag: &str,
    n: usize,
    department: Option<&str>,
) {
    let department = department.map_or("r.department".to_string(), |d| format!("'{d}'"));
    let chosen = format!(
        "SELECT t.id, r.department, r.is_urgent FROM ticket t
         JOIN evaluation_result r ON r.ticket_id = t.id AND r.answered_by = 'model'
         WHERE t.subject = '{tag}' OR t.subject LIKE '{tag} %'
         ORDER BY r.computed_at DESC, t.id LIMIT {n}"
    );
    app.exec(&format!(
        "UPDATE ticket_feedback SET superseded_at = now()
         WHERE superseded_at IS NULL AND labeller AND ticket_id IN (SELECT id FROM ({chosen}) c);
         INSERT INTO ticket_feedback (ticket_id, department, is_urgent, given_by, labeller)
         SELECT r.id, {department}, r.is_urgent >= 0.5, '{giver}', true FROM ({chosen}) r"
    ))
    .await;
}

#[tokio::test]
async fn one_giver_labelling_every_owners_tickets_carries_no_more_than_its_share_of_the_weight() {
    let app = spawn_app().await;
    // Ten owners' 1,300 tickets each, the model's answers: no owner above a fifth.
    for owner in 0..10 {
        answered_tickets(&app, &format!("owner {owner}"), &format!("t{owner}"), 1_300).await;
    }
    // A desk tool labels 150 of every owner's (1,500 labels, weighing 4,500), an agent 10.
    for owner in 0..10 {
        labelled(&app, "tool", &format!("t{owner}"), 150, None).await;
    }
    app.exec(
        "UPDATE ticket_feedback SET given_by = 'agent'
         WHERE id IN (SELECT id FROM ticket_feedback WHERE ticket_id IN
                      (SELECT id FROM ticket WHERE subject LIKE 't0 %') ORDER BY id LIMIT 10)",
    )
    .await;
    let trained = op(
        &app,
        json!({"op": "train", "from": ["feedback:1", "results:1"]}),
    )
    .await;
    let feedback = &trained["provenance"][0];
    // c <= 0.2 × (13,000 / 3 + c + 10): the tool keeps its newest 1,085.
    assert_eq!(feedback["giver_cap"], 1_085, "{feedback}");
    assert_eq!(feedback["giver_capped"], json!({"tool": 1_490 - 1_085}));
    assert_eq!(feedback["givers"], json!({"tool": 1_085, "agent": 10}));
    assert_eq!(
        feedback["giver_weight"],
        json!({"tool": 3_255.0, "agent": 30.0})
    );
    assert_eq!(
        trained["sources"][0]["left_out"]["giver_cap"],
        1_490 - 1_085
    );
    let total = 13_000.0 + 3_255.0 + 30.0;
    assert!(
        3_255.0 / total <= 0.2,
        "the tool's weight is within its share"
    );
    assert_eq!(feedback["owner_cap"], json!(null));
}

/// A classifier's answer for the ticket whose subject is `tag`: the model's department, as a
/// cascade's local answer.
async fn answered_locally(app: &TestApp, tag: &str) {
    app.exec(&format!(
        "WITH l AS (
             INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department,
                                            urgency_score, model_version, prompt_version,
                                            policy_version, answered_by)
             SELECT 'local ' || r.idempotency_key, r.ticket_id, r.is_urgent, r.department, 0.1,
                    'cascade(local-x,0.9,' || r.model_version || ')', r.prompt_version,
                    r.policy_version, 'local'
             FROM evaluation_result r JOIN ticket t ON t.id = r.ticket_id
             WHERE t.subject = '{tag}'
             RETURNING ticket_id, idempotency_key, prompt_version, model_version)
         INSERT INTO ticket_evaluation (ticket_id, idempotency_key, prompt_version, model_version)
         SELECT * FROM l"
    ))
    .await;
}

#[tokio::test]
async fn a_label_against_both_the_model_and_the_classifier_is_held_until_a_second_giver_agrees() {
    let app = spawn_app().await;
    answered_tickets(&app, "desk", "desk", 40).await;
    // One ticket the model and the classifier both call billing (`desk 5`: 1 + 5 % 5).
    answered_locally(&app, "desk 5").await;
    let feedback = |trained: &serde_json::Value| trained["sources"][0].clone();
    let train = json!({"op": "train", "from": ["feedback:1", "results:1"]});

    // One giver says sales: held.
    labelled(&app, "agent a", "desk 5", 1, Some("sales")).await;
    let held = feedback(&op(&app, train.clone()).await);
    assert_eq!(
        (&held["examples"], &held["left_out"]["held"]),
        (&json!(0), &json!(1)),
        "{held}"
    );
    // A label the model's answer agrees with is not held, whoever gives it.
    labelled(&app, "agent a", "desk 6", 1, None).await;
    answered_locally(&app, "desk 6").await;
    let agreed = feedback(&op(&app, train.clone()).await);
    assert_eq!(
        (&agreed["examples"], &agreed["left_out"]["held"]),
        (&json!(1), &json!(1))
    );

    // A second giver says sales too: it trains.
    labelled(&app, "agent b", "desk 5", 1, Some("sales")).await;
    let trained = op(&app, train).await;
    let second = feedback(&trained);
    assert_eq!(
        (&second["examples"], &second["left_out"]["held"]),
        (&json!(2), &json!(0)),
        "{second}"
    );
    assert_eq!(
        trained["provenance"][0]["givers"],
        json!({"agent a": 1, "agent b": 1})
    );
}

#[tokio::test]
async fn a_windows_desk_truth_from_one_giver_is_capped_and_the_rest_falls_back() {
    let app = spawn_app().await;
    // What the candidate learns from, twenty days ago.
    answered_tickets(&app, "desk", "past", 50).await;
    app.exec(
        "UPDATE ticket SET created_at = created_at - interval '20 days';
         UPDATE evaluation_result SET computed_at = computed_at - interval '20 days'",
    )
    .await;
    // This week: one desk tool labels every ticket, disagreeing with the model on each.
    let judged = FLOOR_ROWS as usize + 100;
    answered_tickets(&app, "desk", "now", judged).await;
    labelled(&app, "tool", "now", judged, Some("general")).await;
    let split = json!({"op": "eval", "by_time": true, "days": 7, "threshold": 0.0});
    let report = op(&app, split).await;
    // One giver is all of the desk's truth: it keeps the floor, its oldest 100 fall back to
    // the model's own answer (nothing audited them), which no gate judges by.
    assert_eq!(report["truth_capped"], json!({"tool": 100}), "{report}");
    assert_eq!(report["desk"]["n"], FLOOR_ROWS);
    assert_eq!(report["model"]["n"], 100);
}
