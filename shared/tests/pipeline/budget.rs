//! The daily spend budget (`TRIAGE_DAILY_BUDGET_USD`): workers stop claiming when the day's
//! spend reaches it, spend no attempt and lose nothing, and go on the next UTC day.

use fake_provider::{prefix_tokens, usage_for, Behavior, FakeProvider};
use serde_json::json;
use triage::{
    pipeline::worker::{Report, Worker},
    providers::{PriceTable, Tier},
};

use crate::{
    helpers::operations::{op, try_op},
    helpers::{spawn_app_with, spawn_app_with_fake, TestApp},
};

/// 20 output tokens a call at $500 per million, input free: one cent a call.
const CENTS_PER_CALL: &str = "gpt-6-luna=0/500";
const BUDGET_USD: f64 = 0.03;

async fn app_with_budget(fake: &FakeProvider) -> TestApp {
    spawn_app_with_fake(fake, |config| {
        config.provider.prices = PriceTable::parse(CENTS_PER_CALL).unwrap();
        config.worker.daily_budget_usd = Some(BUDGET_USD);
    })
    .await
}

async fn post_unique(app: &TestApp, n: usize) {
    for i in 0..n {
        let created = app.post_ticket(&format!("Unique ticket {i}"), "body").await;
        assert_eq!(created.status, 201);
    }
}

/// Invocations of `worker` until one is stopped by the budget (within 30 s: while another
/// worker's calls hold what is left, an invocation ends at once, however many it takes).
async fn run_until_budget_stops(
    app: &TestApp,
    worker: &Worker<triage::providers::AnyProvider>,
) -> Report {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let report = app.run_worker_once(worker).await;
        if report.budget_exhausted {
            return report;
        }
    }
    panic!("the budget never stopped the worker");
}

#[tokio::test]
async fn a_worker_stops_claiming_at_the_daily_budget_and_goes_on_the_next_utc_day() {
    let fake = FakeProvider::start().await;
    let app = app_with_budget(&fake).await;
    post_unique(&app, 10).await;
    let worker = app.worker();

    run_until_budget_stops(&app, &worker).await;
    let calls = fake.billed_calls().len();
    // Three cents buy three calls; the estimate may let one more through, never two.
    assert!(
        (3..=4).contains(&calls),
        "{calls} calls for a 3-call budget"
    );
    let untouched = app
        .count("SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0")
        .await;
    assert_eq!(
        untouched,
        10 - calls as i64,
        "the rest waits, no attempt spent"
    );

    let stats = op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["daily_budget_usd"], BUDGET_USD);
    let spent = stats["spent_today_usd"].as_f64().unwrap();
    assert!((spent - calls as f64 * 0.01).abs() < 1e-9, "{stats}");

    // Another invocation the same day: nothing claimed, nothing called.
    let again = app.run_worker_once(&worker).await;
    assert!(again.budget_exhausted && again.claimed == 0, "{again:?}");
    assert_eq!(fake.billed_calls().len(), calls);

    // The next UTC day: yesterday's spend no longer counts.
    app.exec("UPDATE provider_call SET started_at = started_at - interval '1 day'")
        .await;
    run_until_budget_stops(&app, &worker).await;
    assert!(fake.billed_calls().len() >= calls + 3, "work went on");
}

#[tokio::test]
async fn concurrent_workers_overshoot_the_budget_by_at_most_one_call_each() {
    let fake = FakeProvider::start().await;
    let app = app_with_budget(&fake).await;
    post_unique(&app, 20).await;
    let workers = [app.worker(), app.worker(), app.worker()];
    let runs = workers.iter().map(|w| run_until_budget_stops(&app, w));
    futures::future::join_all(runs).await;
    let calls = fake.billed_calls().len();
    assert!(
        (3..=3 + workers.len()).contains(&calls),
        "{calls} calls for a 3-call budget and {} workers",
        workers.len()
    );
}

#[tokio::test]
async fn without_a_budget_stats_show_it_unset_and_today_s_spend() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    post_unique(&app, 1).await;
    app.run_worker_once(&app.worker()).await;
    let stats = op(&app, json!({"op": "stats"})).await;
    assert!(stats["daily_budget_usd"].is_null(), "{stats}");
    assert!(stats["spent_today_usd"].as_f64().unwrap() > 0.0, "{stats}");
}

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
async fn with_room_in_the_budget_one_invocation_drains_the_queue_after_costing_its_first_call() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(CENTS_PER_CALL).unwrap();
        config.worker.daily_budget_usd = Some(100.0);
    })
    .await;
    post_unique(&app, 20).await;
    let report = app.run_worker_once(&app.worker()).await;
    assert_eq!(
        (report.evaluated, report.budget_exhausted),
        (20, false),
        "{report:?}"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM budget_grant").await,
        0,
        "the invocation's grant went back to the fleet at its end"
    );
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

/// Input at $100 per million tokens, output free: a call costs what its ticket's size says.
const PRICED_BY_SIZE: &str = "gpt-6-luna=100/0";

#[tokio::test]
async fn four_workers_on_tickets_of_mixed_sizes_and_scripts_overshoot_the_budget_by_at_most_one_call_each(
) {
    let fake = FakeProvider::start().await;
    let budget_usd = 0.5;
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(PRICED_BY_SIZE).unwrap();
        config.worker.daily_budget_usd = Some(budget_usd);
    })
    .await;
    // Small tickets first: a per-call average learnt from them would let the large ones
    // through by the dozen. A third of the large ones are CJK, which costs up to a token per
    // byte where English costs a quarter: an estimate of four bytes a token would reserve a
    // quarter of what they cost.
    for i in 0..40 {
        let message = match i {
            _ if i < 8 || i % 2 == 0 => "x".repeat(200),
            _ if i % 3 == 0 => "退款请求".repeat(500),
            _ => "x".repeat(6000),
        };
        let created = app.post_ticket(&format!("Ticket {i}"), &message).await;
        assert_eq!(created.status, 201);
    }
    let workers = [app.worker(), app.worker(), app.worker(), app.worker()];
    let runs = workers.iter().map(|w| run_until_budget_stops(&app, w));
    futures::future::join_all(runs).await;

    let prices = PriceTable::parse(PRICED_BY_SIZE).unwrap();
    let billed = fake.billed_calls();
    // What the provider billed each call for (its prompt prefix included), at our prices.
    let cost = |call: &fake_provider::CallRecord| {
        let usage = call.usage;
        prices.cost(
            "gpt-6-luna",
            triage::providers::Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cached_input_tokens: usage.cached_input_tokens,
                cache_write_tokens: usage.cache_write_tokens,
            },
            Tier::Online,
        )
    };
    let spent: f64 = billed.iter().map(cost).sum();
    let largest = billed.iter().map(cost).fold(0.0, f64::max);
    assert!(
        spent >= budget_usd,
        "the budget was reached: {spent} of {budget_usd}"
    );
    assert!(
        spent <= budget_usd + workers.len() as f64 * largest,
        "{} calls spent {spent} for a {budget_usd} budget (largest call {largest})",
        billed.len()
    );
    let ledger = app
        .row("SELECT sum(cost_usd)::float8 FROM provider_call")
        .await
        .get::<_, f64>(0);
    assert!(
        (ledger - spent).abs() < 1e-9,
        "ledger {ledger}, bills {spent}"
    );
}

/// CJK, emoji or random text costs up to a token per byte: a reservation at four bytes a token
/// held a quarter of such a call, so concurrent workers overshot by more than a call each.
#[tokio::test]
async fn a_cjk_tickets_reservation_holds_all_the_provider_can_bill_for_it() {
    let fake = FakeProvider::start().await;
    // Never answered: its ledger row keeps what was reserved for it.
    fake.when_contains("退款", Behavior::Hang);
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(PRICED_BY_SIZE).unwrap();
        config.worker.daily_budget_usd = Some(100.0);
        config.worker.call_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let message = "退款请求".repeat(500);
    assert_eq!(app.post_ticket("Refund", &message).await.status, 201);
    app.run_worker_once(&app.worker()).await;

    let reserved: f64 = app
        .row("SELECT cost_usd::float8 FROM provider_call WHERE outcome = 'timeout'")
        .await
        .get(0);
    let versions = &app.config.versions;
    let policy = triage::providers::Policy::load(versions.policy.as_str()).unwrap();
    let prompt = triage::providers::Prompt::load(versions.prompt.as_str(), &policy).unwrap();
    let billable = usage_for(&message).input_tokens + prefix_tokens(&prompt.text);
    let billable_usd = 100.0 * billable as f64 / 1e6;
    assert!(
        reserved >= billable_usd,
        "reserved {reserved} for a call the provider may bill {billable_usd}"
    );
}

#[tokio::test]
async fn spend_survives_erasure_and_the_ledger_keeps_the_money_without_the_key() {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |config| {
        config.provider.prices = PriceTable::parse(PRICED_BY_SIZE).unwrap();
    })
    .await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let created = app.post_ticket(&format!("Erase me {i}"), "some text").await;
        ids.push(created.body["id"].as_str().unwrap().to_string());
    }
    app.drain(&app.worker(), std::time::Duration::from_secs(10))
        .await;
    let before = op(&app, json!({"op": "stats"})).await;
    let spent = before["spent_today_usd"].as_f64().unwrap();
    assert!(spent > 0.0, "{before}");

    let erased = op(&app, json!({"op": "erase", "ticket_ids": ids})).await;
    assert_eq!(erased["ledger_rows"], 3, "{erased}");
    let after = op(&app, json!({"op": "stats"})).await;
    assert_eq!(
        after["spent_today_usd"], before["spent_today_usd"],
        "{after}"
    );
    assert_eq!(after["cost_usd"], before["cost_usd"], "{after}");
    let kept = app
        .row("SELECT count(*), sum(cost_usd)::float8, count(*) FILTER (WHERE idempotency_key = 'erased') FROM provider_call")
        .await;
    assert_eq!(kept.get::<_, i64>(0), 3);
    assert!((kept.get::<_, f64>(1) - spent).abs() < 1e-9);
    assert_eq!(kept.get::<_, i64>(2), 3, "no content key is left");
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

/// The running total, driven through the ledger's own functions on one claimed job.
mod running_total {
    use std::time::Duration;

    use deadpool_postgres::Client;
    use triage::{
        pipeline::{
            ledger::{self, CallId, CallOutcome, CallRecord},
            limits::budget,
            outbox::{budgeted, claim::Serves, ClaimedJob, Lanes},
        },
        providers::Usage,
    };

    use crate::helpers::{
        budget::{answered, spent_today, start},
        spawn_app, TestApp,
    };

    fn serves(app: &TestApp) -> Serves {
        Serves::for_model_version(&app.config.versions.model)
    }

    /// The decision (`budget_keep`, V15) by table: each case in a transaction rolled back,
    /// with today's spend in the running totals and one claimed job holding `reserved`.
    #[tokio::test]
    async fn a_claim_keeps_jobs_while_money_is_left_before_each_so_one_call_at_most_crosses_the_line(
    ) {
        let app = spawn_app().await;
        let holder = app.claimed("Holds a reservation").await;
        let mut client = app.pool.get().await.unwrap();
        // (budget, spent, reserved, estimates, kept)
        let table: [(f64, f64, f64, &[f64], i32); 12] = [
            (1.0, 0.0, 0.0, &[0.1, 0.1, 0.1], 3),
            (1.0, 0.5, 0.25, &[0.1, 0.1, 0.1, 0.1], 3),
            (1.0, 0.5, 0.3, &[0.1, 0.1, 0.1], 2),
            (1.0, 0.0, 0.99, &[5.0, 0.1], 1),
            (1.0, 0.0, 0.5, &[0.1, 5.0, 0.1], 2),
            (1.0, 0.5, 0.0, &[0.0, 0.0, 0.0], 3),
            (1.0, 0.5, 0.0, &[], 0),
            (1.0, 0.5, 0.5, &[0.1], 0),
            (1.0, 0.5, 0.9, &[0.1], 0),
            (1.0, 1.0, 0.0, &[0.1], 0),
            (1.0, 1.2, 0.0, &[0.1], 0),
            (0.0, 0.0, 0.0, &[0.1], 0),
        ];
        for (budget, spent, reserved, estimates, kept) in table {
            let transaction = client.transaction().await.unwrap();
            transaction
                .execute(
                    "INSERT INTO provider_call_hour (hour, provider, workload, prompt_version, lane, tier, cost_usd) \
                     VALUES (now(), 'openai', 'production', 'v', 'interactive', 'online', $1::float8::numeric)",
                    &[&spent],
                )
                .await
                .unwrap();
            transaction
                .execute(
                    "UPDATE evaluation_outbox SET reserved_usd = $2 WHERE id = $1",
                    &[&holder.id.0, &reserved],
                )
                .await
                .unwrap();
            // Ids of no job: the decision counts them all the same.
            let ids: Vec<i64> = (1..=estimates.len() as i64).map(|i| -i).collect();
            let estimates = estimates.to_vec();
            let row = transaction
                .query_one(
                    "SELECT kept FROM budget_keep($1, $2, $3)",
                    &[&ids, &estimates, &budget],
                )
                .await
                .unwrap();
            assert_eq!(
                row.get::<_, i32>(0),
                kept,
                "{budget} {spent} {reserved} {estimates:?}"
            );
            transaction.rollback().await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_call_counts_at_its_estimate_until_its_usage_corrects_it_once() {
        let app = spawn_app().await;
        let job = app.claimed("Corrected").await;
        let client = app.pool.get().await.unwrap();
        let call = start(&client, &job, 0.5).await;
        assert_eq!(spent_today(&app).await, 0.5, "in flight: its worst case");
        for _ in 0..2 {
            // The second is a write repeated after a blink: nothing moves again.
            ledger::finish_call(&client, call, &answered(Some(0.125)), 0.0)
                .await
                .unwrap();
            assert_eq!(spent_today(&app).await, 0.125);
        }
        let rollup = app
            .row("SELECT sum(calls)::int8, sum(ok)::int8, sum(billed)::int8, sum(billing_unknown)::int8, sum(input_tokens)::int8 FROM provider_call_hour")
            .await;
        let counts: Vec<i64> = (0..5).map(|i| rollup.get(i)).collect();
        assert_eq!(counts, [1, 1, 1, 0, 100]);
    }

    #[tokio::test]
    async fn a_call_of_unknown_outcome_keeps_its_estimate() {
        let app = spawn_app().await;
        let job = app.claimed("Timed out").await;
        let client = app.pool.get().await.unwrap();
        let call = start(&client, &job, 0.5).await;
        let timeout = CallRecord {
            outcome: CallOutcome::Failed(triage::providers::FailureKind::Timeout),
            usage: Usage::default(),
            ..answered(None)
        };
        ledger::finish_call(&client, call, &timeout, 0.0)
            .await
            .unwrap();
        assert_eq!(spent_today(&app).await, 0.5);
        assert_eq!(
            app.count("SELECT sum(billing_unknown)::int8 FROM provider_call_hour")
                .await,
            1
        );
    }

    #[tokio::test]
    async fn a_claim_reserves_each_job_s_estimate_until_its_ledger_row_carries_it() {
        let app = spawn_app().await;
        for i in 0..4 {
            app.post_ticket(&format!("Reserved {i}"), "body").await;
        }
        let client = app.pool.get().await.unwrap();
        let claim = (
            "w",
            10,
            Duration::from_secs(60),
            serves(&app),
            Lanes::default(),
        );
        // 1.0 left: 0.4 and 0.4 fit, the third (0.4 more, 0.2 left before it) crosses the
        // line; the fourth goes back.
        let claimed =
            budgeted::claim_within(&client, 1.0, claim, |_| 0.4, &budget::Grant::default())
                .await
                .unwrap();
        let jobs = match claimed {
            budgeted::Budgeted::Claimed { jobs, cut } => {
                assert!(cut);
                jobs
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(jobs.len(), 3);
        let spend = budget::spend(&client).await.unwrap();
        assert!((spend.reserved_usd - 1.2).abs() < 1e-9, "{spend:?}");
        let again = budgeted::claim_within(&client, 1.0, claim, |_| 0.4, &budget::Grant::default())
            .await
            .unwrap();
        assert!(matches!(again, budgeted::Budgeted::Wait), "{again:?}");
        let untouched =
            "SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0";
        assert_eq!(
            app.count(untouched).await,
            1,
            "nothing left: the claim rolled back"
        );

        start(&client, &jobs[0], 0.4).await;
        let spend = budget::spend(&client).await.unwrap();
        assert!((spend.reserved_usd - 0.8).abs() < 1e-9, "{spend:?}");
        assert!((spend.spent_today_usd - 0.4).abs() < 1e-9, "{spend:?}");
    }

    /// One claim of one job at $0.5 by `worker` under `budget_usd`.
    async fn claim_one_at_half_a_dollar(
        app: &TestApp,
        client: &Client,
        (worker, budget_usd): (&str, f64),
        grant: &budget::Grant,
    ) -> budgeted::Budgeted {
        let claim = (
            worker,
            1,
            Duration::from_secs(60),
            serves(app),
            Lanes::default(),
        );
        budgeted::claim_within(client, budget_usd, claim, |_| 0.5, grant)
            .await
            .unwrap()
    }

    /// [`claim_one_at_half_a_dollar`], which must keep what it claimed.
    async fn claim_one(
        app: &TestApp,
        client: &Client,
        claimant: (&str, f64),
        grant: &budget::Grant,
    ) -> Vec<ClaimedJob> {
        match claim_one_at_half_a_dollar(app, client, claimant, grant).await {
            budgeted::Budgeted::Claimed { jobs, .. } => jobs,
            other => panic!("{other:?}"),
        }
    }

    async fn grant_row(app: &TestApp, worker: &str) -> Option<f64> {
        let client = app.pool.get().await.unwrap();
        client
            .query_opt("SELECT usd FROM budget_grant WHERE worker = $1", &[&worker])
            .await
            .unwrap()
            .map(|row| row.get(0))
    }

    /// Jobs whose claim went through a decision hold a reservation of their own.
    async fn decided(app: &TestApp) -> i64 {
        app.count("SELECT count(*) FROM evaluation_outbox WHERE reserved_usd IS NOT NULL")
            .await
    }

    #[tokio::test]
    async fn far_from_the_line_one_decision_grants_room_for_claims_made_without_one_which_the_fleet_counts(
    ) {
        let app = spawn_app().await;
        let tickets: Vec<_> = (0..40)
            .map(|i| (format!("Granted {i}"), "body".to_string()))
            .collect();
        app.ingest_many(&tickets).await;
        let client = app.pool.get().await.unwrap();
        let grant = budget::Grant::default();

        // The decision keeps the job ($0.5 reserved on it) and grants 32 claims like it ($16):
        // $99.5 are left, half of it is more than asked.
        let first = claim_one(&app, &client, ("a", 100.0), &grant).await;
        assert_eq!((first.len(), decided(&app).await), (1, 1));
        assert_eq!(grant_row(&app, "a").await, Some(16.0));
        let spend = budget::spend(&client).await.unwrap();
        assert!((spend.reserved_usd - 16.5).abs() < 1e-9, "{spend:?}");

        // Thirty-two claims under the grant: no decision, no reservation of their own.
        let mut covered = Vec::new();
        for _ in 0..32 {
            covered.extend(claim_one(&app, &client, ("a", 100.0), &grant).await);
        }
        assert_eq!((covered.len(), decided(&app).await), (32, 1));
        assert_eq!(grant_row(&app, "a").await, Some(16.0));

        // Another worker's decision counts the grant: of $20, $3.5 are left before its job,
        // and it is granted half of what is left after it.
        let other = budget::Grant::default();
        assert_eq!(claim_one(&app, &client, ("b", 20.0), &other).await.len(), 1);
        assert_eq!(grant_row(&app, "b").await, Some(1.5));

        // The grant used up, the next claim is decided: the thirty not started are reported
        // ($15) and a new grant comes on top.
        let two_started = &covered[..2];
        for job in two_started {
            start(&client, job, 0.5).await;
            grant.started(job.id);
        }
        claim_one(&app, &client, ("a", 100.0), &grant).await;
        assert_eq!(decided(&app).await, 3);
        assert_eq!(grant_row(&app, "a").await, Some(15.0 + 16.0));

        // The invocation's end gives the room back; only the kept jobs' reservations and the
        // calls started stay counted.
        grant.release(&app.pool, "a").await.unwrap();
        other.release(&app.pool, "b").await.unwrap();
        assert_eq!(grant_row(&app, "a").await, None);
        let spend = budget::spend(&client).await.unwrap();
        assert!((spend.spent_today_usd - 1.0).abs() < 1e-9, "{spend:?}");
        assert!((spend.reserved_usd - 1.5).abs() < 1e-9, "{spend:?}");
    }

    #[tokio::test]
    async fn near_the_line_grants_shrink_and_claims_under_them_never_cross_it() {
        let app = spawn_app().await;
        let tickets: Vec<_> = (0..20)
            .map(|i| (format!("Near {i}"), "body".to_string()))
            .collect();
        app.ingest_many(&tickets).await;
        let client = app.pool.get().await.unwrap();
        let grant = budget::Grant::default();
        // $2 at $0.5 a job: the first is decided ($1.5 left after it, half of it granted),
        // the second is claimed under the grant, the third and fourth are decided (grants of
        // $0.25, then nothing), the fifth waits: $2 claimed, and not a job more.
        let mut kept = 0;
        let mut waited = false;
        for _ in 0..6 {
            match claim_one_at_half_a_dollar(&app, &client, ("a", 2.0), &grant).await {
                budgeted::Budgeted::Claimed { jobs, .. } => kept += jobs.len(),
                budgeted::Budgeted::Wait => waited = true,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(kept, 4, "$2 at $0.5 a job, with and without decisions");
        assert!(waited);
        let spend = budget::spend(&client).await.unwrap();
        assert!(
            spend.reserved_usd <= 2.0 + 1e-9,
            "never more claimed than the budget: {spend:?}"
        );
    }

    #[tokio::test]
    async fn a_claim_cut_by_the_budget_gives_the_rest_back_untouched() {
        let app = spawn_app().await;
        for i in 0..3 {
            app.post_ticket(&format!("Cut {i}"), "body").await;
        }
        let client = app.pool.get().await.unwrap();
        let claim = (
            "w",
            10,
            Duration::from_secs(60),
            serves(&app),
            Lanes::default(),
        );
        let claimed =
            budgeted::claim_within(&client, 0.1, claim, |_| 0.4, &budget::Grant::default())
                .await
                .unwrap();
        assert!(
            matches!(&claimed, budgeted::Budgeted::Claimed { jobs, cut: true } if jobs.len() == 1),
            "{claimed:?}"
        );
        assert_eq!(
            app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'pending' AND attempts = 0 AND claim_token IS NULL")
                .await,
            2
        );
    }

    #[tokio::test]
    async fn a_call_started_before_midnight_is_yesterday_s_spend_and_so_is_its_correction() {
        let app = spawn_app().await;
        let job = app.claimed("Late night").await;
        let client = app.pool.get().await.unwrap();
        let call = start(&client, &job, 0.5).await;
        // The call started one second before today's 00:00 UTC (a move into yesterday's
        // partition: counted out of today once, into yesterday once).
        let started_at = app
            .row("UPDATE provider_call SET started_at = date_trunc('day', now(), 'UTC') - interval '1 second' RETURNING started_at")
            .await
            .get(0);
        let call = CallId { started_at, ..call };
        assert_eq!(spent_today(&app).await, 0.0, "yesterday's call");
        ledger::finish_call(&client, call, &answered(Some(0.25)), 0.0)
            .await
            .unwrap();
        assert_eq!(
            spent_today(&app).await,
            0.0,
            "its correction is yesterday's too"
        );
        let yesterday = app
            .row("SELECT sum(cost_usd)::float8 FROM provider_call_hour WHERE hour < date_trunc('day', now(), 'UTC')")
            .await
            .get::<_, f64>(0);
        assert_eq!(yesterday, 0.25);
    }
}
