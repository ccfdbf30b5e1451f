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
