use std::time::Duration;

use fake_provider::{
    zendesk::{changed_event, FakeZendesk, ACCOUNT_ID},
    FakeProvider,
};
use serde_json::{json, Value};
use triage::{domain::ticket::TicketId, pipeline::erase};

use super::{
    spawn, spawn_with_model, start_fake, timestamp,
    writeback::{desk_taxonomy, taxonomy_of, triaged, GROUPS},
    AGENT, API_USER,
};
use crate::helpers::TestApp;

const FEEDBACK: &str = "SELECT count(*) FROM ticket_feedback";
/// The ticket's current desk label.
const LABEL: &str = "SELECT department, is_urgent FROM ticket_feedback \
                     WHERE superseded_at IS NULL AND labeller";

/// A desk under its own taxonomy of `groups` with Zendesk ticket `id` triaged (not yet
/// written back).
async fn desk_with_ticket(groups: &[(&str, i64)], id: i64) -> (FakeZendesk, FakeProvider, TestApp) {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    let desk = app.under_policy(&taxonomy_of(&app, groups).await);
    triaged(&desk, &fake, id, "Invoice shows the wrong amount").await;
    (fake, model, app)
}

/// An agent's edit of ticket `id` in the fake, and its change event at `ago` before now.
fn edited(
    fake: &FakeZendesk,
    event_id: &str,
    id: i64,
    group: Option<i64>,
    priority: Option<&str>,
    ago: Duration,
) -> Value {
    fake.agent_edit(id, group, priority);
    let mut event = changed_event(event_id, &fake.ticket(id).unwrap(), AGENT, group.is_some());
    event["time"] = json!(timestamp(ago));
    event
}

async fn label(app: &TestApp) -> (Option<String>, Option<bool>) {
    let row = app.row(LABEL).await;
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn a_priority_only_change_labels_urgency_and_creates_no_department_label() {
    let (fake, _model, app) = desk_with_ticket(&GROUPS, 35436).await;
    app.deliver_all(Duration::from_secs(30)).await;

    let urgent = edited(
        &fake,
        "agent-1",
        35436,
        None,
        Some("urgent"),
        Duration::from_secs(60),
    );
    assert_eq!(app.post_event(&urgent).await.body["received"], "feedback");
    assert_eq!(label(&app).await, (None, Some(true)), "urgency only");
    // Agreement counts urgency, and no department accuracy from a label that has none.
    let totals = app
        .row("SELECT sum(n)::int8, sum(urgent_tp + urgent_fn)::int8 FROM feedback_agreement_day")
        .await;
    assert_eq!((totals.get::<_, i64>(0), totals.get::<_, i64>(1)), (0, 1));
    assert_eq!(
        app.count("SELECT count(*) FROM feedback_match WHERE department_agrees IS NULL")
            .await,
        1
    );

    // A later regroup labels the department and keeps the urgency the agent gave.
    let regroup = edited(
        &fake,
        "agent-2",
        35436,
        Some(GROUPS[1].1),
        None,
        Duration::ZERO,
    );
    assert_eq!(app.post_event(&regroup).await.body["received"], "feedback");
    assert_eq!(label(&app).await, (Some("technical".into()), Some(true)));
    let totals = app
        .row("SELECT sum(n)::int8, sum(urgent_tp + urgent_fn)::int8 FROM feedback_agreement_day")
        .await;
    assert_eq!((totals.get::<_, i64>(0), totals.get::<_, i64>(1)), (1, 1));
}

#[tokio::test]
async fn a_change_by_no_person_creates_no_label() {
    let (fake, _model, app) = desk_with_ticket(&GROUPS, 35436).await;
    app.deliver_all(Duration::from_secs(30)).await;
    fake.agent_edit(35436, Some(GROUPS[1].1), Some("urgent"));
    let ticket = fake.ticket(35436).unwrap();
    // A trigger's or an automation's change (Zendesk's actor -1), and the system's.
    let by_trigger = changed_event("trigger-1", &ticket, -1, true);
    let mut by_system = changed_event("system-1", &ticket, AGENT, false);
    by_system["detail"]["actor_id"] = json!("system");
    for event in [by_trigger, by_system] {
        let answer = app.post_event(&event).await;
        assert_eq!(answer.body["received"], "ignored", "{:?}", answer.body);
        assert!(answer.body["why"].as_str().unwrap().contains("trigger"));
    }
    assert_eq!(app.count(FEEDBACK).await, 0);
}

#[tokio::test]
async fn changes_apply_in_the_order_of_their_event_time_not_their_arrival() {
    let (fake, _model, app) = desk_with_ticket(&GROUPS, 35436).await;
    app.deliver_all(Duration::from_secs(30)).await;
    let (account, technical) = (GROUPS[2].1, GROUPS[1].1);
    let earlier = edited(
        &fake,
        "agent-1",
        35436,
        Some(account),
        None,
        Duration::from_secs(120),
    );
    let later = edited(
        &fake,
        "agent-2",
        35436,
        Some(technical),
        None,
        Duration::from_secs(60),
    );
    // An older priority change is another field's: it still applies.
    let priority = edited(
        &fake,
        "agent-3",
        35436,
        None,
        Some("urgent"),
        Duration::from_secs(180),
    );

    assert_eq!(app.post_event(&later).await.body["received"], "feedback");
    let stale = app.post_event(&earlier).await;
    assert_eq!(stale.body["received"], "ignored", "{:?}", stale.body);
    assert!(stale.body["why"].as_str().unwrap().contains("older"));
    assert_eq!(label(&app).await, (Some("technical".into()), None));
    assert_eq!(app.post_event(&priority).await.body["received"], "feedback");
    assert_eq!(label(&app).await, (Some("technical".into()), Some(true)));
    // The stale event is seen: its retry adds nothing either.
    assert_eq!(
        app.post_event(&earlier).await.body["received"],
        "already here"
    );
}

#[tokio::test]
async fn a_correction_before_the_write_back_is_kept_and_applied_once_the_answer_is_written() {
    let (fake, _model, app) = desk_with_ticket(&GROUPS, 35436).await;
    let technical = GROUPS[1].1;
    let early = edited(
        &fake,
        "agent-1",
        35436,
        Some(technical),
        None,
        Duration::ZERO,
    );
    let answer = app.post_event(&early).await;
    assert_eq!(answer.body["received"], "kept", "{:?}", answer.body);
    assert_eq!(
        app.post_event(&early).await.body["received"],
        "kept",
        "a retry"
    );
    assert_eq!(app.count(FEEDBACK).await, 0);

    app.deliver_all(Duration::from_secs(30)).await;
    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!(
        fake.ticket(35436).unwrap().group_id,
        Some(technical),
        "the agent's group stays"
    );
    assert_eq!(label(&app).await, (Some("technical".into()), None));
    let given_by: String = app.row("SELECT given_by FROM ticket_feedback").await.get(0);
    assert_eq!(given_by, format!("zendesk:{ACCOUNT_ID}:{AGENT}"));
    assert_eq!(
        app.count("SELECT count(*) FROM zendesk_correction").await,
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM feedback_match").await,
        1,
        "matched to the answer"
    );
    assert_eq!(
        app.post_event(&early).await.body["received"],
        "already here"
    );
}

#[tokio::test]
async fn a_group_several_departments_share_gives_no_department_label() {
    let shared = [
        ("billing", 360001),
        ("sales", 360001),
        ("technical", 360002),
    ];
    let (fake, _model, app) = desk_with_ticket(&shared, 35436).await;
    app.deliver_all(Duration::from_secs(30)).await;
    let regroup = edited(&fake, "agent-1", 35436, Some(360001), None, Duration::ZERO);
    let answer = app.post_event(&regroup).await;
    assert_eq!(answer.body["received"], "ignored", "{:?}", answer.body);
    assert!(answer.body["why"]
        .as_str()
        .unwrap()
        .contains("shared by several departments"));
    assert_eq!(app.count(FEEDBACK).await, 0);
}

#[tokio::test]
async fn an_agents_regroup_becomes_the_desks_feedback_and_our_own_updates_do_not() {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    let desk = app.under_policy(&desk_taxonomy(&app).await);
    triaged(&desk, &fake, 35436, "Invoice shows the wrong amount").await;
    app.deliver_all(Duration::from_secs(30)).await;

    // Our own write-back comes back as a change event by the connector's API user.
    let ours = changed_event("echo-1", &fake.ticket(35436).unwrap(), API_USER, true);
    let answer = app.post_event(&ours).await;
    assert_eq!(answer.body["received"], "ignored", "{:?}", answer.body);
    assert_eq!(app.count(FEEDBACK).await, 0, "no loop from our own updates");

    // An agent moves the ticket to the technical group and makes it urgent.
    let technical = GROUPS[1].1;
    fake.agent_edit(35436, Some(technical), Some("urgent"));
    let regroup = changed_event("agent-1", &fake.ticket(35436).unwrap(), AGENT, true);
    let answer = app.post_event(&regroup).await;
    assert_eq!(answer.body["received"], "feedback", "{:?}", answer.body);
    let again = app.post_event(&regroup).await;
    assert_eq!(
        again.body["received"], "already here",
        "Zendesk's retry adds nothing"
    );
    let row = app
        .row("SELECT department, is_urgent, given_by, labeller FROM ticket_feedback")
        .await;
    assert_eq!(
        row.get::<_, Option<String>>(0).as_deref(),
        Some("technical")
    );
    assert_eq!(
        row.get::<_, Option<bool>>(1),
        None,
        "a group change labels the department only"
    );
    // Given by the agent, not the desk principal: a giver's share can be capped.
    assert_eq!(
        row.get::<_, String>(2),
        format!("zendesk:{ACCOUNT_ID}:{AGENT}")
    );
    // The desk's agents label, with no TRIAGE_LABELLERS set (docs/labelling.md).
    assert!(app.config.labelling.labellers.is_empty());
    assert!(row.get::<_, bool>(3), "a labeller's");
    assert_eq!(app.count(FEEDBACK).await, 1);
    // The correction is matched against the answer, as POST /tickets/{id}/feedback's is.
    assert_eq!(app.count("SELECT count(*) FROM feedback_match").await, 1);

    // A group no department has is no label.
    fake.agent_edit(35436, Some(4242), None);
    let unmapped = changed_event("agent-2", &fake.ticket(35436).unwrap(), AGENT, true);
    assert_eq!(app.post_event(&unmapped).await.body["received"], "ignored");
    assert_eq!(app.count(FEEDBACK).await, 1);
}

#[tokio::test]
async fn events_for_a_ticket_erased_in_triage_are_ignored() {
    let fake = start_fake().await;
    let app = spawn(Some(&fake)).await;
    triaged(&app, &fake, 9, "The app crashes when I log in").await;
    app.deliver_all(Duration::from_secs(30)).await;
    let id: uuid::Uuid = app.row("SELECT ticket_id FROM zendesk_ticket").await.get(0);
    erase::erase(&app.pool, &[TicketId(id)]).await.unwrap();

    fake.agent_edit(9, None, Some("urgent"));
    let changed = changed_event("agent-1", &fake.ticket(9).unwrap(), AGENT, false);
    let answer = app.post_event(&changed).await;
    assert_eq!(answer.body["received"], "ignored", "{:?}", answer.body);
    let created_again =
        fake_provider::zendesk::created_event("created-9-again", &fake.ticket(9).unwrap());
    assert_eq!(
        app.post_event(&created_again).await.body["received"],
        "already here"
    );
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 0);
    assert_eq!(app.count(FEEDBACK).await, 0);
}
