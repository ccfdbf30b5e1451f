use std::time::Duration;

use fake_provider::{
    zendesk::{changed_event, ACCOUNT_ID},
    FakeProvider,
};
use triage::{domain::ticket::TicketId, pipeline::erase};

use super::{
    spawn, spawn_with_model, start_fake,
    writeback::{desk_taxonomy, triaged, GROUPS},
    AGENT, API_USER,
};

const FEEDBACK: &str = "SELECT count(*) FROM ticket_feedback";

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
    assert_eq!(row.get::<_, String>(0), "technical");
    assert!(row.get::<_, bool>(1));
    assert_eq!(
        row.get::<_, String>(2),
        triage::pipeline::zendesk::owner(ACCOUNT_ID)
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
