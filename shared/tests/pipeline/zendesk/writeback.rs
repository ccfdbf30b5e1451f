use std::time::Duration;

use fake_provider::{
    zendesk::{created_event, FakeZendesk, Ticket},
    Behavior, FakeProvider,
};
use serde_json::{json, Value};
use triage::{
    domain::taxonomy::Taxonomy,
    pipeline::{
        delivery::zendesk::{department_tag, PROVISIONAL_TAG, URGENT_TAG},
        taxonomy,
    },
};

use super::{spawn_with_model, start_fake};
use crate::helpers::TestApp;

/// The built-in departments as a desk's taxonomy, each routed to a group `3600nn`.
pub(crate) const GROUPS: [(&str, i64); 5] = [
    ("billing", 360001),
    ("technical", 360002),
    ("account", 360003),
    ("sales", 360004),
    ("general", 360005),
];

pub(crate) async fn desk_taxonomy(app: &TestApp) -> String {
    taxonomy_of(app, &GROUPS).await
}

/// A desk's taxonomy of `groups` (department, Zendesk group), stored; its policy version.
pub(crate) async fn taxonomy_of(app: &TestApp, groups: &[(&str, i64)]) -> String {
    let departments: Vec<_> = groups
        .iter()
        .map(|(name, group)| json!({"name": name, "description": format!("{name} questions"), "zendesk_group_id": group}))
        .collect();
    let file = json!({"name": "desk", "departments": departments,
                      "urgent": "Money was taken twice, or a service is down.", "urgent_threshold": 0.5});
    let parsed = Taxonomy::parse(file.to_string().as_bytes()).unwrap();
    taxonomy::add(&app.pool.get().await.unwrap(), &parsed)
        .await
        .unwrap()
        .policy_version
}

/// The department and urgency triage answered for Zendesk ticket `id`.
pub(crate) async fn answer(app: &TestApp, id: i64) -> (String, bool) {
    let row = app
        .pool
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT r.department, r.is_urgent >= 0.5 FROM evaluation_result r
             JOIN ticket_evaluation te ON te.idempotency_key = r.idempotency_key
             JOIN zendesk_ticket z ON z.ticket_id = te.ticket_id WHERE z.zendesk_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Zendesk ticket `id` created in the fake, sent as a created event, and triaged.
pub(crate) async fn triaged(app: &TestApp, fake: &FakeZendesk, id: i64, subject: &str) {
    fake.add(Ticket::new(id, subject, "Please look at this today."));
    let sent = app
        .post_event(&created_event(
            &format!("created-{id}"),
            &fake.ticket(id).unwrap(),
        ))
        .await;
    assert_eq!(sent.status, 200, "{:?}", sent.body);
    app.drain(&app.worker(), Duration::from_secs(20)).await;
}

pub(crate) fn puts(fake: &FakeZendesk, id: i64, status: u16) -> usize {
    let path = format!("/api/v2/tickets/{id}.json");
    fake.requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.path == path && r.status == status)
        .count()
}

#[tokio::test]
async fn a_triaged_ticket_is_written_back_once_through_a_429_and_an_agents_concurrent_edit() {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    // The desk's taxonomy is the deployment's: the ticket is triaged under it.
    let desk = app.under_policy(&desk_taxonomy(&app).await);
    triaged(&desk, &fake, 35436, "URGENT: my card was charged twice").await;
    let (department, urgent) = answer(&app, 35436).await;
    // Zendesk is at its limit for the first request, and an agent routes the ticket to a
    // group of their own between the connector's read and its update.
    fake.throttle(&[1]);
    fake.edit_before_next_update(35436, Some(777), None);
    app.deliver_all(Duration::from_secs(30)).await;

    assert_eq!(fake.violations(), Vec::<String>::new());
    let ticket = fake.ticket(35436).unwrap();
    assert_eq!(ticket.group_id, Some(777), "the agent's group stays");
    assert!(
        ticket.tags.contains(&department_tag(&department)),
        "{:?}",
        ticket.tags
    );
    assert_eq!(ticket.priority.as_deref() == Some("urgent"), urgent);
    assert_eq!(puts(&fake, 35436, 409), 1, "the stale update was refused");
    assert_eq!(puts(&fake, 35436, 200), 1, "written once");
    assert!(fake.requests().iter().any(|r| r.status == 429));
    // Zendesk's 429 held every deliverer of the account (the shared limit's row).
    assert_eq!(
        app.count("SELECT count(*) FROM provider_rate_limit WHERE provider LIKE 'zendesk:%' AND held_until > '-infinity'").await,
        1
    );
    assert_eq!(
        app.count("SELECT conflicts::int8 FROM zendesk_ticket")
            .await,
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM delivery WHERE status = 'done'")
            .await,
        1
    );
}

/// Zendesk caps Update Ticket at 100 a minute per account, agents' saves included: updates
/// take a slot of their own limit too (`TRIAGE_ZENDESK_UPDATE_RPM`, 80), and a 429 to an update
/// holds the updates only; reading tickets goes on.
#[tokio::test]
async fn a_429_to_an_update_holds_the_updates_only() {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    let desk = app.under_policy(&desk_taxonomy(&app).await);
    triaged(&desk, &fake, 41, "Invoice shows the wrong amount").await;
    fake.throttle_updates(&[1]);
    app.deliver_all(Duration::from_secs(30)).await;

    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!((puts(&fake, 41, 429), puts(&fake, 41, 200)), (1, 1));
    let held = |limit: &str| {
        format!(
            "SELECT count(*) FROM provider_rate_limit \
             WHERE provider LIKE '{limit}:%' AND held_until > '-infinity'"
        )
    };
    assert_eq!(app.count(&held("zendesk-updates")).await, 1);
    assert_eq!(app.count(&held("zendesk")).await, 0, "reads were not held");
    assert_eq!(
        app.count("SELECT count(*) FROM delivery WHERE status = 'done'")
            .await,
        1
    );
}

#[tokio::test]
async fn the_departments_group_is_written_where_no_agent_set_one_and_the_built_in_policy_writes_none(
) {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    // Ticket 1 comes in under the desk's taxonomy, ticket 2 under the built-in policy.
    let desk = app.under_policy(&desk_taxonomy(&app).await);
    triaged(&desk, &fake, 1, "Invoice shows the wrong amount").await;
    triaged(&app, &fake, 2, "The app crashes when I log in").await;
    app.deliver_all(Duration::from_secs(30)).await;

    assert_eq!(fake.violations(), Vec::<String>::new());
    let (department, _) = answer(&app, 1).await;
    let group = GROUPS
        .iter()
        .find(|(name, _)| *name == department)
        .unwrap()
        .1;
    assert_eq!(fake.ticket(1).unwrap().group_id, Some(group));
    let (department, _) = answer(&app, 2).await;
    let built_in = fake.ticket(2).unwrap();
    assert_eq!(built_in.group_id, None, "policy-v1 has no group ids");
    assert!(built_in.tags.contains(&department_tag(&department)));
    assert_eq!((puts(&fake, 1, 200), puts(&fake, 2, 200)), (1, 1));
}

/// Zendesk ticket `id` created in the fake and sent as a created event, then given a
/// provisional urgent answer written back, as the cascade gives one while the provider cannot
/// be asked (`cascade::provisional`'s statement, its row and its event, without a classifier).
async fn provisionally_urgent(app: &TestApp, fake: &FakeZendesk, id: i64, subject: &str) {
    fake.add(Ticket::new(id, subject, "Please look at this today."));
    let event = created_event(&format!("created-{id}"), &fake.ticket(id).unwrap());
    assert_eq!(app.post_event(&event).await.status, 200);
    let given = app
        .pool
        .get()
        .await
        .unwrap()
        .execute(
            "WITH job AS (
                SELECT o.idempotency_key, o.ticket_id, o.prompt_version, o.model_version,
                       o.policy_version
                FROM evaluation_outbox o JOIN zendesk_ticket z ON z.ticket_id = o.ticket_id
                WHERE z.zendesk_id = $1
            ), given AS (
                INSERT INTO provisional_result (idempotency_key, ticket_id, is_urgent, department,
                    urgency_score, confidence, prompt_version, model_version, policy_version, reason)
                SELECT idempotency_key, ticket_id, 0.9, 'billing', 0.9, 0.6, prompt_version,
                       model_version, policy_version, 'breaker_open'
                FROM job
                RETURNING idempotency_key, ticket_id
            )
            INSERT INTO delivery (subscription_id, ticket_id, idempotency_key, event_id, provisional)
            SELECT s.id, g.ticket_id, g.idempotency_key,
                   delivery_event_id(g.ticket_id, g.idempotency_key || '/provisional'), true
            FROM given g JOIN subscription s ON s.kind = 'zendesk'",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(given, 1);
    app.deliver_all(Duration::from_secs(30)).await;
    let ticket = fake.ticket(id).unwrap();
    assert_eq!(ticket.priority.as_deref(), Some("urgent"), "{ticket:?}");
    assert!(ticket.tags.contains(&PROVISIONAL_TAG.to_string()));
}

fn final_answer(model: &FakeProvider, urgency: f64) {
    model.set_default(Behavior::Answer(json!({
        "is_urgent": urgency, "department": "billing", "urgency_score": urgency,
    })));
}

/// The bodies of the updates sent for ticket `id`, in order.
fn updates(fake: &FakeZendesk, id: i64) -> Vec<Value> {
    let path = format!("/api/v2/tickets/{id}.json");
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "PUT" && r.path == path)
        .map(|r| r.body["ticket"].clone())
        .collect()
}

#[tokio::test]
async fn an_agents_priority_after_a_provisional_urgent_survives_the_final_urgent_answer() {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    provisionally_urgent(&app, &fake, 51, "My card was charged twice").await;
    // An agent looks at it and decides it is high, not urgent; then the model's answer comes.
    fake.agent_edit(51, None, Some("high"));
    final_answer(&model, 0.9);
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    app.deliver_all(Duration::from_secs(30)).await;

    assert_eq!(fake.violations(), Vec::<String>::new());
    let ticket = fake.ticket(51).unwrap();
    assert_eq!(
        ticket.priority.as_deref(),
        Some("high"),
        "the agent's choice"
    );
    assert!(
        ticket.tags.contains(&URGENT_TAG.to_string()),
        "{:?}",
        ticket.tags
    );
    assert!(!ticket.tags.contains(&PROVISIONAL_TAG.to_string()));
    let sent = updates(&fake, 51);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent[1].get("priority").is_none(), "{}", sent[1]);
}

#[tokio::test]
async fn a_provisional_urgent_over_an_empty_priority_is_undone_with_null() {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    provisionally_urgent(&app, &fake, 52, "Where is my invoice for March?").await;
    final_answer(&model, 0.1);
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    app.deliver_all(Duration::from_secs(30)).await;

    assert_eq!(fake.violations(), Vec::<String>::new());
    let sent = updates(&fake, 52);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[1].get("priority"), Some(&Value::Null), "{}", sent[1]);
    let ticket = fake.ticket(52).unwrap();
    assert_eq!(ticket.priority, None, "Zendesk's default again");
    assert!(!ticket.tags.contains(&URGENT_TAG.to_string()));
}

#[tokio::test]
async fn a_closed_tickets_422_abandons_its_delivery_with_the_reason_and_no_retry() {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    triaged(&app, &fake, 53, "The app crashes when I log in").await;
    // Closed before the answer is written (or merged into another ticket, which closes it).
    fake.set_status(53, "closed");
    app.deliver_all(Duration::from_secs(30)).await;
    app.deliver_all(Duration::from_secs(5)).await;

    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!(puts(&fake, 53, 422), 1, "refused once, never retried");
    let row = app
        .row("SELECT status, error_class, last_error FROM delivery")
        .await;
    assert_eq!(row.get::<_, &str>(0), "dead");
    assert_eq!(row.get::<_, &str>(1), "abandoned");
    let reason: &str = row.get(2);
    assert!(
        reason.contains("Status: closed prevents ticket update"),
        "{reason}"
    );
    assert_eq!(
        app.count(
            "SELECT count(*) FROM subscription WHERE disabled_at IS NULL AND failing_since IS NULL"
        )
        .await,
        1,
        "the desk's write-back is well"
    );
}
