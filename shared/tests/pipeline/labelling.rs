//! Safe inputs (issue 39, item 5; docs/labelling.md): feedback trains and judges only from a
//! giver who may label (`TRIAGE_LABELLERS`, the scope `triage/label`, the Zendesk connector,
//! operators); each owner's share of a training source is capped; `local_model` records where
//! each classifier's examples came from.

use std::time::Duration;

use fake_provider::FakeProvider;
use serde_json::{json, Value};

use triage::pipeline::cascade::caps::FLOOR_ROWS;

use crate::{
    cascade::caps::answered_tickets,
    feedback::other,
    helpers::gateway::{iam, scoped_jwt, send},
    helpers::operations::{op, try_op},
    helpers::{spawn_app_with_fake, TestApp},
};

const TENANT: &str = "arn:aws:iam::123456789012:user/tenant";

/// `caller` (an IAM user's ARN) sends a ticket through API Gateway: its id.
async fn post_as(app: &TestApp, caller: &str, subject: &str) -> String {
    let body = json!({"subject": subject, "message": "please look at this"}).to_string();
    let mut event = testkit::lambda::events::http_api("POST", "/tickets", Some(&body));
    event["requestContext"]["authorizer"] = iam(caller);
    let (status, created) = send(app, event.to_string()).await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_string()
}

/// `authorizer` labels ticket `id` (the first of the tenant's is urgent, whoever labels it:
/// urgency needs an example of each kind to learn): the status and the stored feedback.
async fn label_as(app: &TestApp, authorizer: Value, id: &str, department: &str) -> (u16, Value) {
    let urgent = app
        .count(&format!(
            "SELECT count(*) FROM ticket WHERE subject = 'Tenant ticket 0' AND id = '{id}'"
        ))
        .await
        == 1;
    let labels = json!({"department": department, "is_urgent": urgent}).to_string();
    let path = format!("/tickets/{id}/feedback");
    let mut event = testkit::lambda::events::http_api("POST", &path, Some(&labels));
    event["requestContext"]["authorizer"] = authorizer;
    send(app, event.to_string()).await
}

/// The model's department for ticket `id`.
async fn answered(app: &TestApp, id: &str) -> String {
    app.row(&format!(
        "SELECT r.department FROM ticket_evaluation te \
         JOIN evaluation_result r USING (idempotency_key) WHERE te.ticket_id = '{id}'"
    ))
    .await
    .get(0)
}

/// What the desk's feedback decides: the classifier trained from it, the agreement figures,
/// the `eval --set feedback` set, and the gate's verdict.
#[derive(Debug, PartialEq)]
struct Judged {
    classifier: Value,
    agreement: Value,
    set: Value,
    gate: bool,
}

/// Judged as the desk's feedback stands now; the gate before this call's own eval run, so it
/// passes only on the set an earlier call evaluated.
async fn judged(app: &TestApp) -> Judged {
    let trained = op(
        app,
        json!({"op": "train", "from": ["results:1", "feedback:1"]}),
    )
    .await;
    let stats = op(app, json!({"op": "stats"})).await;
    let pair = &app.config.versions;
    let promote = json!({"op": "promote", "prompt_version": pair.prompt.as_str(),
                         "model_version": pair.model.as_str()});
    let gate = try_op(app, promote).await.is_ok();
    let eval = json!({"op": "eval", "set": "feedback", "days": 7, "split": "test"});
    let queued = op(app, eval.clone()).await;
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    assert_eq!(op(app, eval).await["complete"], true);
    Judged {
        classifier: trained["version"].clone(),
        agreement: stats["agreement"].clone(),
        set: queued["set"].clone(),
        gate,
    }
}

/// The tenant's four tickets, answered, and labelled by the desk (an operator's batch) as the
/// model answered them; the app gates on `feedback:7` and lists `labellers`.
async fn desk_labelled(
    fake: &FakeProvider,
    labellers: &[&str],
) -> (TestApp, Vec<(String, String)>) {
    let labellers: Vec<String> = labellers.iter().map(|l| l.to_string()).collect();
    let app = spawn_app_with_fake(fake, move |config| {
        config.quality.set = Some("feedback:7".into());
        config.labelling.labellers = labellers;
    })
    .await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(post_as(&app, TENANT, &format!("Tenant ticket {i}")).await);
    }
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    let mut tickets = Vec::new();
    for id in ids {
        let department = answered(&app, &id).await;
        tickets.push((id, department));
    }
    let items: Vec<Value> = tickets
        .iter()
        .enumerate()
        .map(|(i, (id, d))| json!({"ticket_id": id, "department": d, "is_urgent": i == 0}))
        .collect();
    op(&app, json!({"op": "feedback", "items": items})).await;
    (app, tickets)
}

#[tokio::test]
async fn a_caller_who_may_not_label_relabelling_its_own_tickets_changes_no_classifier_figure_set_or_gate(
) {
    let fake = FakeProvider::start().await;
    let (app, tickets) = desk_labelled(&fake, &["arn:aws:iam::123456789012:user/desk"]).await;
    judged(&app).await;
    let before = judged(&app).await;
    assert!(before.gate, "the desk's set was evaluated: {before:?}");
    assert_eq!(before.set["rows"], 4);

    for (id, department) in &tickets {
        let (status, given) = label_as(&app, iam(TENANT), id, other(department)).await;
        assert_eq!(status, 200, "stored, as SPEC says: {given}");
        assert_eq!(given["labeller"], false);
        assert_eq!(given["versions_matched"], 0);
        assert_eq!(
            given["replaced"], false,
            "the desk's label is not its to replace"
        );
    }
    // A token with the feedback scope alone is no labeller either.
    let scoped = scoped_jwt(
        "tenant-tool",
        "triage/feedback.write triage/tickets.read_all",
    );
    let (status, given) = label_as(&app, scoped, &tickets[0].0, other(&tickets[0].1)).await;
    assert_eq!((status, given["labeller"].clone()), (200, json!(false)));
    assert_eq!(
        app.count("SELECT count(*) FROM ticket_feedback WHERE NOT labeller")
            .await,
        5,
        "every relabel is kept"
    );

    let after = judged(&app).await;
    assert_eq!(after, before, "nothing the desk's labels decide moved");
}

#[tokio::test]
async fn the_same_relabels_from_a_labeller_count_for_training_agreement_eval_and_the_gate() {
    let fake = FakeProvider::start().await;
    let (app, tickets) = desk_labelled(&fake, &[TENANT]).await;
    judged(&app).await;
    let before = judged(&app).await;
    // Half of them relabelled (the classifier still has two departments to tell apart).
    for (id, department) in &tickets[..2] {
        let (status, given) = label_as(&app, iam(TENANT), id, other(department)).await;
        assert_eq!(status, 200, "{given}");
        assert_eq!(given["labeller"], true);
        assert_eq!(given["replaced"], true, "it replaces the desk's label");
    }
    let after = judged(&app).await;
    assert_ne!(after.classifier, before.classifier);
    assert_ne!(after.agreement, before.agreement);
    assert_ne!(after.set["digest"], before.set["digest"]);
    assert!(
        before.gate && !after.gate,
        "the gate wants a run on the new labels"
    );
    let week = after
        .agreement
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["window_days"] == 7);
    assert_eq!(week.unwrap()["department_accuracy"], 0.5, "{after:?}");

    // The scope `triage/label` makes a JWT caller a labeller too (one that reads every ticket).
    let desk = scoped_jwt(
        "desk-tool",
        "triage/feedback.write triage/tickets.read_all triage/label",
    );
    let (status, given) = label_as(&app, desk, &tickets[0].0, &tickets[0].1).await;
    assert_eq!((status, given["labeller"].clone()), (200, json!(true)));
    assert_eq!(given["versions_matched"], 1);
}

#[tokio::test]
async fn one_owners_many_tickets_are_capped_in_a_training_set_of_several_owners_and_recorded() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let flood = triage::pipeline::ingest::owner_of("iam arn:aws:iam::123456789012:user/flood");
    answered_tickets(&app, &flood, "flood", FLOOR_ROWS as usize + 500).await;
    let others = [
        "arn:aws:iam::123456789012:user/b",
        "arn:aws:iam::123456789012:user/c",
    ];
    for caller in others {
        for i in 0..2 {
            post_as(&app, caller, &format!("{caller} ticket {i}")).await;
        }
    }
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    // Three owners: none gives more than a third (2 <= (2 + 2 + 2) / 3), but none is cut
    // below the floor: the flood gives its newest FLOOR_ROWS.
    let trained = op(&app, json!({"op": "train", "from": ["results:1"]})).await;
    assert_eq!(trained["examples"], FLOOR_ROWS + 4, "{trained}");
    let version = trained["version"].as_str().unwrap();
    let recorded = app
        .row(&format!(
            "SELECT provenance FROM local_model WHERE version = '{version}'"
        ))
        .await
        .get::<_, Value>(0);
    assert_eq!(recorded, trained["provenance"]);
    let source = &recorded[0];
    assert_eq!(source["source"], "results:1");
    assert_eq!(source["days"], 1);
    assert_eq!(source["owner_cap"], FLOOR_ROWS);
    assert_eq!(source["owner_capped"], json!({ flood.clone(): 500 }));
    assert_eq!(source["owners"][&flood], FLOOR_ROWS, "{source}");
    assert_eq!(source["owners"].as_object().unwrap().len(), 3);
    assert!(source["owners"]
        .as_object()
        .unwrap()
        .iter()
        .all(|(owner, n)| *owner == flood || n == 2));
    let model = app.config.versions.model.as_str();
    assert_eq!(source["givers"], json!({ model: FLOOR_ROWS + 4 }));
    // `triage models --json` shows it.
    let models = op(&app, json!({"op": "models"})).await;
    let listed = models
        .as_array()
        .or_else(|| models["models"].as_array())
        .unwrap();
    let shown = listed.iter().find(|m| m["version"] == version).unwrap();
    assert_eq!(shown["provenance"], recorded);
}

#[tokio::test]
async fn feedback_records_its_givers_and_owners_per_classifier() {
    let fake = FakeProvider::start().await;
    let (app, tickets) = desk_labelled(&fake, &[]).await;
    // The tenant's own relabel is stored but is neither a giver nor an example.
    label_as(&app, iam(TENANT), &tickets[0].0, other(&tickets[0].1)).await;
    let trained = op(
        &app,
        json!({"op": "train", "from": ["feedback:1", "results:1"]}),
    )
    .await;
    let feedback = &trained["provenance"][0];
    assert_eq!(feedback["source"], "feedback:1");
    assert_eq!(feedback["examples"], 4);
    let tenant = triage::pipeline::ingest::owner_of(&format!("iam {TENANT}"));
    assert_eq!(feedback["owners"], json!({ tenant.clone(): 4 }));
    let givers = feedback["givers"].as_object().unwrap();
    assert_eq!(givers.len(), 1, "the operator alone: {feedback}");
    assert_eq!(givers.values().next().unwrap(), 4);
    assert!(!givers.contains_key(&tenant));
    assert_eq!(feedback["owner_cap"], Value::Null, "one owner: no cap");
}

/// The `sql` block of docs/labelling.md's "Upgrading", as an operator pastes it.
fn upgrade_sql() -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/labelling.md"))
        .unwrap();
    let upgrading = &doc[doc.find("## Upgrading").unwrap()..];
    let start = upgrading.find("```sql\n").unwrap() + "```sql\n".len();
    let end = start + upgrading[start..].find("```").unwrap();
    upgrading[start..end].to_string()
}

#[tokio::test]
async fn the_upgrades_sql_stops_counting_an_api_callers_earlier_labels_and_keeps_the_desks() {
    let fake = FakeProvider::start().await;
    // Before V36 every giver counted: the tenant's labels are a labeller's here.
    let (app, tickets) = desk_labelled(&fake, &[TENANT]).await;
    for (id, department) in &tickets[..2] {
        label_as(&app, iam(TENANT), id, other(department)).await;
    }
    let desk = "SELECT count(*) FROM ticket_feedback WHERE labeller AND superseded_at IS NULL";
    assert_eq!(app.count(desk).await, 4);
    assert_eq!(app.count("SELECT count(*) FROM feedback_match").await, 4);

    // The listed principal in the docs' example is not the tenant.
    let sql = upgrade_sql();
    assert!(sql.contains("ARRAY['iam arn:aws:sts::123456789012:assumed-role/desk']"));
    app.exec(&sql).await;
    assert_eq!(
        app.count(
            "SELECT count(*) FROM ticket_feedback WHERE NOT labeller AND superseded_at IS NULL"
        )
        .await,
        2,
        "the tenant's current labels"
    );
    // Its matches are gone (and its share of the agreement with them); the operator's stay,
    // although superseded, until their tickets are labelled again.
    assert_eq!(app.count("SELECT count(*) FROM feedback_match").await, 2);
    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["agreement"][0]["n"], 2, "{stats}");

    // Listed, the tenant keeps its labels.
    let (app, tickets) = desk_labelled(&fake, &[TENANT]).await;
    let (status, _) = label_as(&app, iam(TENANT), &tickets[0].0, other(&tickets[0].1)).await;
    assert_eq!(status, 200);
    assert_eq!(app.count(desk).await, 4);
    let listed = sql.replace(
        "'iam arn:aws:sts::123456789012:assumed-role/desk'",
        &format!("'iam {TENANT}'"),
    );
    app.exec(&listed).await;
    assert_eq!(
        app.count("SELECT count(*) FROM ticket_feedback WHERE NOT labeller")
            .await,
        0
    );
}

/// One resource or parameter of template.yaml: from `  NAME:` to the next one.
fn section<'a>(template: &'a str, name: &str) -> &'a str {
    let rest = template
        .split(&format!("\n  {name}:\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("{name} in template.yaml"));
    let end = rest
        .match_indices("\n  ")
        .find(|(i, _)| !rest[i + 3..].starts_with(' '))
        .map_or(rest.len(), |(i, _)| i);
    &rest[..end]
}

#[test]
fn the_deployed_api_gets_the_labellers_and_the_ops_function_the_owner_and_giver_shares_from_parameters(
) {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
    let api = section(&template, "ApiFunction");
    assert!(
        api.contains("TRIAGE_LABELLERS: !If [HasLabellers, !Ref Labellers, !Ref AWS::NoValue]"),
        "{api}"
    );
    assert!(template.contains("HasLabellers: !Not [!Equals [!Ref Labellers, \"\"]]"));
    let ops = section(&template, "OpsFunction");
    assert!(
        ops.contains("TRIAGE_TRAIN_OWNER_SHARE: !Ref TrainOwnerShare"),
        "{ops}"
    );
    assert!(
        ops.contains("TRIAGE_TRAIN_GIVER_SHARE: !Ref TrainGiverShare"),
        "{ops}"
    );
    for parameter in ["TrainOwnerShare", "TrainGiverShare"] {
        let share = section(&template, parameter);
        assert!(share.contains("Default: \"0.2\""), "{share}");
    }
    // What the functions read from them.
    let config = triage::config::Config::from_lookup(|name| match name {
        "TRIAGE_LABELLERS" => Some(format!(" {TENANT} , https://issuer.example desk,")),
        "TRIAGE_TRAIN_OWNER_SHARE" => Some("0.25".into()),
        "TRIAGE_TRAIN_GIVER_SHARE" => Some("0.1".into()),
        _ => None,
    })
    .unwrap();
    assert_eq!(
        config.labelling.labellers,
        [TENANT.to_string(), "https://issuer.example desk".into()]
    );
    assert_eq!(config.labelling.owner_share, 0.25);
    assert_eq!(config.labelling.giver_share, 0.1);
    let defaults = triage::config::Config::from_lookup(|_| None).unwrap();
    assert_eq!(defaults.labelling.owner_share, 0.2);
    assert_eq!(defaults.labelling.giver_share, 0.2);
    assert!(defaults.labelling.labellers.is_empty());
    for name in ["TRIAGE_TRAIN_OWNER_SHARE", "TRIAGE_TRAIN_GIVER_SHARE"] {
        for bad in ["0", "1.5", "-0.2", "x", "NaN"] {
            let refused = triage::config::Config::from_lookup(|n| (n == name).then(|| bad.into()))
                .expect_err(bad);
            assert!(refused.to_string().contains(name), "{bad}: {refused}");
        }
    }
}
