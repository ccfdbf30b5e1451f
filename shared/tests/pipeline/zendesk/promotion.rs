//! Promote and reprocess rewrite no history (issue 51 item 6): a reprocess's results reach
//! Zendesk only through a promotion the desk asked to write back (`--write-back`), and then
//! only its open tickets; promoting back with it restores them.

use std::time::Duration;

use fake_provider::{zendesk::FakeZendesk, Behavior, FakeProvider};
use serde_json::{json, Value};
use triage::pipeline::delivery::zendesk::department_tag;

use super::{
    spawn_with_model, start_fake,
    writeback::{puts, triaged},
};
use crate::helpers::{operations::op, TestApp};

fn answering(model: &FakeProvider, department: &str) {
    model.set_default(Behavior::Answer(json!({
        "is_urgent": 0.1, "department": department, "urgency_score": 0.1,
    })));
}

fn promote(prompt_version: &str, write_back: bool) -> Value {
    json!({"op": "promote", "prompt_version": prompt_version, "force": true,
           "reason": "no eval set in this test", "write_back": write_back})
}

async fn zendesk_deliveries(app: &TestApp) -> i64 {
    app.count("SELECT count(*) FROM delivery d JOIN subscription s ON s.id = d.subscription_id WHERE s.kind = 'zendesk'")
        .await
}

fn tagged(fake: &FakeZendesk, id: i64, department: &str) -> bool {
    fake.ticket(id)
        .unwrap()
        .tags
        .contains(&department_tag(department))
}

#[tokio::test]
async fn a_promotion_writes_back_only_when_asked_and_then_only_to_open_tickets() {
    let (fake, model) = (start_fake().await, FakeProvider::start().await);
    let app = spawn_with_model(&fake, &model).await;
    answering(&model, "billing");
    for id in [1, 2, 3] {
        triaged(&app, &fake, id, &format!("Invoice {id} is wrong")).await;
    }
    app.deliver_all(Duration::from_secs(30)).await;
    assert_eq!(
        (
            puts(&fake, 1, 200),
            puts(&fake, 2, 200),
            puts(&fake, 3, 200)
        ),
        (1, 1, 1)
    );
    fake.set_status(2, "solved");
    fake.set_status(3, "closed");

    // A reprocess under another prompt answers otherwise; its results wait for a promotion.
    answering(&model, "technical");
    op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v5", "spread": "0s"}),
    )
    .await;
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    assert_eq!(
        zendesk_deliveries(&app).await,
        3,
        "a reprocess writes nothing back"
    );

    // Promoted without --write-back: Zendesk is sent nothing.
    let promoted = op(&app, promote("triage-v5", false)).await;
    assert_eq!(promoted["write_back"], false, "{promoted}");
    app.deliver_all(Duration::from_secs(30)).await;
    assert_eq!(zendesk_deliveries(&app).await, 3);
    assert!(tagged(&fake, 1, "billing") && !tagged(&fake, 1, "technical"));

    // With it: the open ticket is rewritten, the solved and closed ones are left as closed.
    op(&app, promote("triage-v5", true)).await;
    app.deliver_all(Duration::from_secs(30)).await;
    assert_eq!(fake.violations(), Vec::<String>::new());
    assert!(tagged(&fake, 1, "technical") && !tagged(&fake, 1, "billing"));
    assert_eq!((puts(&fake, 2, 200), puts(&fake, 3, 200)), (1, 1));
    assert_eq!(puts(&fake, 3, 422), 0, "a closed ticket is not even tried");
    assert!(tagged(&fake, 2, "billing") && tagged(&fake, 3, "billing"));
    assert_eq!(
        app.count("SELECT count(*) FROM delivery WHERE status <> 'done'")
            .await,
        0
    );

    // Promoting back with --write-back restores the open ticket (a rollback).
    let configured = app.config.versions.prompt.to_string();
    op(&app, promote(&configured, true)).await;
    app.deliver_all(Duration::from_secs(30)).await;
    assert!(tagged(&fake, 1, "billing") && !tagged(&fake, 1, "technical"));
    assert_eq!((puts(&fake, 2, 200), puts(&fake, 3, 200)), (1, 1));
}
