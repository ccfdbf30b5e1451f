//! How eval work runs: absent from stats, the age metric and the queue counts; a stopped
//! eval continued without paying twice; one nobody waits for concluded by the sweeper;
//! its own workers leaving production tickets to the fleet.

use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use triage::{
    operations,
    pipeline::worker,
    quality::{self, Watch},
};

use crate::helpers::spawn_app_with_fake;

use super::{evaluate, fake_classifier, write_set};

#[tokio::test]
async fn eval_work_is_absent_from_stats_the_age_metric_and_the_queue_counts() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    // The ops Lambda's way (here from the CLI, which alone reads a file): queue and report,
    // without waiting for the fleet.
    let queued = crate::helpers::operations::op_cli(
        &app,
        json!({"op": "eval", "set": set.path, "split": "dev"}),
    )
    .await;
    assert_eq!(queued["complete"], false);
    assert_eq!(queued["runs"][0]["answered"], 0);
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE workload = 'eval' AND status = 'pending'"
        )
        .await,
        30
    );
    // Jobs old enough to raise the age alarm if they counted.
    app.exec("UPDATE evaluation_outbox SET available_at = now() - interval '1 hour'")
        .await;
    let stats = crate::helpers::operations::op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["pending"], 0, "{stats}");
    assert_eq!(stats["oldest_pending_age_seconds"], 0.0);

    // A production ticket beside them is counted, alone.
    app.post_ticket("Production", "a real customer").await;
    let stats = crate::helpers::operations::op(&app, json!({"op": "stats"})).await;
    assert_eq!(stats["pending"], 1);
    app.drain(&app.worker(), Duration::from_secs(60)).await;
    let stats = crate::helpers::operations::op(&app, json!({"op": "stats"})).await;
    assert_eq!(
        (stats["done"].as_i64(), stats["billed_calls"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(stats["pending"], 0);
    assert_eq!(
        fake.billed_calls().len(),
        31,
        "the eval jobs were answered too"
    );
    // The console's overview reads the same report.
    let health = triage::pipeline::reads::report::health(
        &app.pool,
        triage::pipeline::outbox::claim::Serves::Models,
        None,
    )
    .await
    .unwrap();
    assert_eq!((health.done, health.billed_calls), (1, 1));
}

#[tokio::test]
async fn a_stopped_eval_stores_nothing_and_a_rerun_continues_without_paying_twice() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    fake.set_default(fake_provider::Behavior::Classify.after(Duration::from_millis(100)));
    let app = spawn_app_with_fake(&fake, |config| config.worker.concurrency = 2).await;
    let request: operations::Request =
        serde_json::from_value(json!({"op": "eval", "set": set.path, "split": "test"})).unwrap();
    let stop = CancellationToken::new();
    // Ctrl-C once the first answers are in.
    let tell = {
        let stop = stop.clone();
        std::sync::Arc::new(move |p: &quality::Progress| {
            if p.answered >= 4 {
                stop.cancel();
            }
        })
    };
    let watch = Watch {
        wait: true,
        stop: stop.clone(),
        progress: Some(tell),
    };
    let operator = operations::Operator::os_user();
    let w = app.worker();
    let (outcome, worked) = tokio::join!(
        operations::run_with(&app.pool, &app.config, request, &operator, &watch),
        worker::run_until_stopped(&w, Duration::from_millis(20), stop.clone())
    );
    worked.unwrap();
    let stopped = serde_json::to_value(outcome.unwrap()).unwrap();
    assert_eq!(stopped["complete"], false);
    let answered = stopped["runs"][0]["answered"].as_u64().unwrap();
    assert!((4..30).contains(&answered), "stopped part way: {answered}");
    assert_eq!(
        app.count("SELECT count(*) FROM eval_run").await,
        0,
        "nothing stored"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'processing'")
            .await,
        0,
        "in-flight calls finished and were written"
    );

    let resumed = evaluate(&app, &set.path, "test", &["triage-v3"]).await;
    assert_eq!(resumed["complete"], true);
    let resumed_calls = resumed["runs"][0]["calls"].as_i64().unwrap();
    assert_eq!(app.count("SELECT count(*) FROM eval_run").await, 1);
    assert_eq!(
        fake.billed_calls().len(),
        30,
        "every content paid once, across both runs"
    );
    // The rerun continued the stopped run: one run, whose calls are all the run's, each once.
    assert_eq!(resumed["run_id"], stopped["run_id"]);
    assert_eq!(resumed_calls, 30);
    assert!(fake.billed_by_content().values().all(|n| *n == 1));
}

/// The ops Lambda's way end to end: the request returns at once, the fleet answers, and the
/// sweeper's tick concludes the run (stored once, however many ticks see it complete).
#[tokio::test]
async fn an_eval_nobody_waits_for_is_concluded_by_the_sweepers_tick_once() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let queued = crate::helpers::operations::op_cli(
        &app,
        json!({"op": "eval", "set": set.path, "split": "test", "versions": ["triage-v5"]}),
    )
    .await;
    assert_eq!(queued["complete"], false);
    let sweeper =
        triage::pipeline::sweep::Sweeper::new(app.pool.clone(), app.config.clone()).unwrap();
    let tick = || operations::sweep(&sweeper, std::time::Instant::now() + Duration::from_secs(5));
    tick().await.unwrap();
    assert_eq!(
        app.count("SELECT count(*) FROM eval_run").await,
        0,
        "not answered yet"
    );
    let listed = crate::helpers::operations::op(&app, json!({"op": "eval", "list": true})).await;
    assert_eq!(listed["running"][0]["run_id"], queued["run_id"]);
    assert_eq!(listed["running"][0]["progress"]["total"], 30);

    app.drain(&app.worker(), Duration::from_secs(20)).await;
    tick().await.unwrap();
    tick().await.unwrap();
    assert_eq!(
        app.count("SELECT count(*) FROM eval_run").await,
        1,
        "stored once"
    );
    let listed = crate::helpers::operations::op(&app, json!({"op": "eval", "list": true})).await;
    assert_eq!(listed["running"], json!([]));
    assert_eq!(listed["runs"][0]["n"], 30);
}

/// `triage eval` on a laptop pointed at production (an SSM tunnel) answers its own jobs only.
#[tokio::test]
async fn triage_evals_own_workers_leave_production_tickets_to_the_fleet() {
    let set = write_set();
    let fake = fake_classifier(&set).await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    assert_eq!(
        app.post_ticket("Production", "a customer waits")
            .await
            .status,
        201
    );
    crate::helpers::operations::op_cli(
        &app,
        json!({"op": "eval", "set": set.path, "split": "test"}),
    )
    .await;
    let eval_worker = app.worker().eval_only();
    app.run_worker_once(&eval_worker).await;
    app.run_worker_once(&eval_worker).await;
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE workload = 'eval' AND status = 'done'"
        )
        .await,
        30
    );
    assert_eq!(
        app.count("SELECT count(*) FROM evaluation_outbox WHERE workload = 'production' AND status = 'pending' AND attempts = 0").await,
        1,
        "left untouched: {:?}",
        app.status_counts().await
    );
}
