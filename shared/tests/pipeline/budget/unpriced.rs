//! A model without a price under a budget: refused at start naming TRIAGE_PRICES, its jobs
//! wait unevaluated, and reprocess, promote and redrive refuse it.

use fake_provider::FakeProvider;
use serde_json::json;
use triage::{pipeline::worker::Worker, providers::PriceTable};

use crate::{
    helpers::operations::try_op,
    helpers::{spawn_app_with, spawn_app_with_fake},
};

use super::{post_unique, CENTS_PER_CALL};

#[tokio::test]
async fn with_a_budget_a_model_without_a_price_is_refused_at_start_naming_triage_prices() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.versions.model = "gpt-unpriced@low".parse().unwrap();
        config.worker.daily_budget_usd = Some(10.0);
    })
    .await;
    let provider = triage::providers::AnyProvider::from_config(
        &app.config.provider,
        app.config.worker.call_timeout,
    )
    .unwrap();
    let refused = Worker::new(app.pool.clone(), provider, app.config.clone())
        .err()
        .expect("an unpriced model under a budget is refused");
    assert!(refused.to_string().contains("TRIAGE_PRICES"), "{refused}");
}

#[tokio::test]
async fn under_a_budget_a_job_whose_model_has_no_price_is_not_evaluated_but_waits() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(CENTS_PER_CALL).unwrap();
        config.worker.daily_budget_usd = Some(100.0);
    })
    .await;
    post_unique(&app, 2).await;
    // One job queued for a model that has no price (queued before the budget was set, or
    // before its price was removed).
    app.exec(
        "UPDATE evaluation_outbox SET model_version = 'gpt-unpriced@low'
         WHERE id = (SELECT min(id) FROM evaluation_outbox)",
    )
    .await;
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!((report.evaluated, report.released), (1, 1), "{report:?}");
    assert_eq!(
        fake.billed_calls().len(),
        1,
        "no call for the unpriced model"
    );
    let waiting = app
        .row(
            "SELECT status, attempts, available_at > now() + interval '4 minutes', last_error
             FROM evaluation_outbox WHERE model_version = 'gpt-unpriced@low'",
        )
        .await;
    assert_eq!(waiting.get::<_, String>(0), "pending");
    assert_eq!(waiting.get::<_, i32>(1), 0, "its attempt given back");
    assert!(
        waiting.get::<_, bool>(2),
        "it waits, not claimed again at once"
    );
    assert!(
        waiting.get::<_, String>(3).contains("TRIAGE_PRICES"),
        "the reason is reported on the job"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call WHERE model_version = 'gpt-unpriced@low'")
            .await,
        0,
        "nothing in the ledger for it"
    );
}

#[tokio::test]
async fn an_unpriced_model_is_refused_for_reprocess_and_promote_under_a_budget() {
    let app = spawn_app_with(|config| config.worker.daily_budget_usd = Some(1.0)).await;
    for request in [
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v5", "model_version": "gpt-unpriced@low", "confirm": true}),
        json!({"op": "promote", "prompt_version": "triage-v5", "model_version": "gpt-unpriced@low"}),
    ] {
        let refused = try_op(&app, request.clone()).await.unwrap_err();
        assert!(
            matches!(refused, triage::Error::InvalidRequest(_)),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("TRIAGE_PRICES"),
            "{request}: {refused}"
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 0);
}

#[tokio::test]
async fn an_unpriced_models_dead_letters_are_refused_for_redrive_under_a_budget() {
    let app = spawn_app_with(|config| {
        config.worker.daily_budget_usd = Some(1.0);
        config.provider.prices = PriceTable::parse(CENTS_PER_CALL).unwrap();
    })
    .await;
    app.ingest_many(&[("a".into(), "b".into()), ("c".into(), "d".into())])
        .await;
    app.exec(
        "UPDATE evaluation_outbox SET status = 'dead', finished_at = now(), error_class = 'provider_fatal';
         UPDATE evaluation_outbox SET model_version = 'gpt-unpriced@low' WHERE id = (SELECT min(id) FROM evaluation_outbox)",
    )
    .await;
    let refused = try_op(&app, json!({"op": "redrive", "confirm": true}))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, triage::Error::InvalidRequest(_))
            && refused.to_string().contains("gpt-unpriced"),
        "{refused}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'dead'")
            .await,
        2,
        "nothing moved"
    );
    // The priced model's alone (another reason) moves, as before.
    app.exec("UPDATE evaluation_outbox SET error_class = 'other' WHERE model_version = 'gpt-unpriced@low'")
        .await;
    let moved = try_op(&app, json!({"op": "redrive", "reason": "provider_fatal"})).await;
    assert!(moved.is_ok(), "{moved:?}");
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'pending'")
            .await,
        1
    );
}
