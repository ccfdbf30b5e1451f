//! While the provider cannot be asked (its breaker open, the budget spent, a long wait), new
//! tickets of a cascade get a provisional local answer, announced once, which the final
//! answer replaces (a second event); a provisional answer never dedups a call.

use std::{collections::HashSet, time::Duration};

use fake_provider::{Behavior, FakeProvider};
use serde_json::{json, Value};
use triage::{pipeline::sweep::Sweeper, providers::PriceTable};

use super::{configured, trained};
use crate::{
    helpers::operations::op,
    helpers::webhooks::{fast_delivery, ingest, subscribe, Answer, Receiver},
    helpers::{spawn_app_with_fake, TestApp},
};

/// The worker's invocations until every waiting ticket has a provisional answer.
async fn until_provisional(app: &TestApp, n: i64) {
    let worker = app.worker();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while app.count("SELECT count(*) FROM provisional_result").await < n {
        assert!(std::time::Instant::now() < until, "no provisional answers");
        app.run_worker_once(&worker).await;
    }
}

#[tokio::test]
async fn while_the_provider_is_down_new_tickets_get_a_provisional_answer_that_the_final_one_replaces_each_announced_once(
) {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, fast_delivery).await;
    let (local, _) = trained(&app, "shipped").await;
    // Threshold 1: the classifier never answers finally, only provisionally.
    let app = configured(
        &app,
        &format!("cascade({local},1,gpt-6-luna@medium)"),
        |_| {},
    );
    let cascade = app.config.versions.model.to_string();
    let receiver = Receiver::start(|_| Answer::Status(204)).await;
    subscribe(&app, None, &receiver.url).await;
    fake.set_outage(Some(Behavior::Status(500)));
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(ingest(&app, None, &format!("Invoice {i} charged twice")).await);
    }
    until_provisional(&app, 3).await;
    assert_eq!(
        app.count("SELECT count(*) FROM provisional_result WHERE reason = 'breaker_open'")
            .await,
        3
    );
    for id in &ids {
        let shown = app.get_ticket(id).await.body;
        let evaluation = &shown["evaluation"];
        assert_eq!(evaluation["status"], "provisional", "{shown}");
        assert_eq!(evaluation["provisional"], true);
        assert_eq!(evaluation["answered_by"], "local");
        assert_eq!(evaluation["model_version"], cascade.as_str());
        assert!(evaluation["department"].is_string());
    }
    // Not done in the reports, and no result to dedup a call with.
    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["done"], 0, "{stats}");
    assert_eq!(app.count("SELECT count(*) FROM evaluation_result").await, 0);
    app.deliver_all(Duration::from_secs(10)).await;
    let provisional_events: Vec<Value> = bodies(&receiver);
    assert_eq!(provisional_events.len(), 3);
    assert!(provisional_events
        .iter()
        .all(|e| e["data"]["provisional"] == true && e["data"]["answered_by"] == "local"));

    // The provider is back: each ticket's call is made and paid once, its final answer
    // replaces the provisional one and is announced as a second event.
    fake.set_outage(None);
    app.drain(&app.worker(), Duration::from_secs(20)).await;
    assert_eq!(fake.billed_by_content().len(), 3);
    assert!(fake.billed_by_content().values().all(|&n| n == 1));
    for id in &ids {
        let shown = app.get_ticket(id).await.body;
        assert_eq!(shown["evaluation"]["status"], "done", "{shown}");
        assert_eq!(shown["evaluation"]["provisional"], false);
        assert_eq!(shown["evaluation"]["answered_by"], "model");
    }
    app.deliver_all(Duration::from_secs(10)).await;
    let events = bodies(&receiver);
    assert_eq!(events.len(), 6, "three provisional, three final");
    let final_events: Vec<&Value> = events
        .iter()
        .filter(|e| e["data"]["provisional"] == false)
        .collect();
    assert_eq!(final_events.len(), 3);
    assert!(final_events
        .iter()
        .all(|e| e["data"]["answered_by"] == "model"));
    let webhook_ids: HashSet<String> = receiver.received().iter().map(|r| r.id.clone()).collect();
    assert_eq!(webhook_ids.len(), 6, "each event once, with its own id");
    // Answered finally, nothing is given again.
    app.run_worker_once(&app.worker()).await;
    assert_eq!(
        app.count("SELECT count(*) FROM provisional_result").await,
        3
    );
    assert_eq!(app.count("SELECT count(*) FROM delivery").await, 6);
}

fn bodies(receiver: &Receiver) -> Vec<Value> {
    receiver
        .received()
        .iter()
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect()
}

#[tokio::test]
async fn a_spent_budget_or_a_long_wait_gives_the_provisional_answer_and_it_never_dedups_a_call() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        // One cent a call, three cents a day.
        config.provider.prices = PriceTable::parse("gpt-6-luna=0/500").unwrap();
        config.worker.daily_budget_usd = Some(0.03);
    })
    .await;
    let (local, _) = trained(&app, "shipped").await;
    let app = configured(
        &app,
        &format!("cascade({local},1,gpt-6-luna@medium)"),
        |_| {},
    );
    for i in 0..8 {
        app.post_ticket(&format!("Unique ticket {i}"), "body").await;
    }
    let worker = app.worker();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let report = loop {
        let report = app.run_worker_once(&worker).await;
        if report.budget_exhausted {
            break report;
        }
        assert!(
            std::time::Instant::now() < until,
            "the budget never stopped the worker"
        );
    };
    let answered = app.count("SELECT count(*) FROM evaluation_result").await;
    let given = app
        .count("SELECT count(*) FROM provisional_result WHERE reason = 'budget_spent'")
        .await;
    assert_eq!(given, 8 - answered, "{report:?}");
    assert!(report.provisional > 0);

    // The sweeper gives it to a ticket that waited longer than the delay, and not before.
    let waiting = |after: Duration| {
        configured(&app, app.config.versions.model.as_str(), move |config| {
            config.worker.daily_budget_usd = None;
            config.worker.provisional_after = after;
        })
    };
    let late = waiting(Duration::from_secs(3600));
    late.post_ticket("One more", "body").await;
    let sweeper = |app: &TestApp| Sweeper::new(app.pool.clone(), app.config.clone()).unwrap();
    let deadline = || std::time::Instant::now() + Duration::from_secs(5);
    let tick = sweeper(&late).tick(deadline()).await.unwrap();
    assert_eq!(tick.provisional, 0, "it has not waited an hour");
    let soon = waiting(Duration::ZERO);
    let tick = sweeper(&soon).tick(deadline()).await.unwrap();
    assert_eq!(tick.provisional, 1);
    assert_eq!(
        soon.count("SELECT count(*) FROM provisional_result WHERE reason = 'waiting'")
            .await,
        1
    );
    // A provisional answer never stands for the call: with room again, every ticket is
    // evaluated and billed once.
    soon.drain(&soon.worker(), Duration::from_secs(20)).await;
    assert_eq!(
        soon.count("SELECT count(*) FROM evaluation_result").await,
        9
    );
    assert_eq!(fake.billed_by_content().len(), 9);
}
