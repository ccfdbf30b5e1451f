//! Bulk work in provider batches completes at the batch price, falls back online line by
//! line, is collected by the sweeper's ticks and read by key, and leaves the online
//! breaker and the slots alone.

use std::time::{Duration, Instant};

use fake_provider::{Api, Behavior, FakeProvider};
use triage::{
    pipeline::{
        ledger,
        outbox::{
            claim,
            submission::{self, SubmissionId},
        },
        reads::report,
        sweep::Sweeper,
    },
    providers::{Tier, Usage},
};

use crate::helpers::spawn_app;

use super::{answered_call, batch_app, collected_once, one_batch_sent, outbox_done};

#[tokio::test]
async fn bulk_work_goes_to_a_batch_completed_at_the_batch_price_and_failed_or_expired_lines_go_online(
) {
    for api in [Api::OpenAi, Api::Anthropic] {
        let fake = FakeProvider::start().await;
        // The batch's lines, in claim order: answered, expired, failed.
        fake.push(Behavior::Classify);
        fake.push(Behavior::Hang);
        fake.push(Behavior::Status(500));
        let app = batch_app(&fake, api, None).await;
        let worker = app.worker();
        // The first invocation submits the bulk lane as one batch, and evaluates the new ticket
        // online meanwhile.
        app.run_worker_once(&worker).await;
        let sent = fake.batches();
        assert_eq!(sent.len(), 1, "{api:?}");
        assert_eq!(sent[0].custom_ids.len(), 3, "{api:?}");
        assert_eq!(outbox_done(&app).await, 1, "{api:?}: the new ticket");
        assert_eq!(
            app.count("SELECT count(*) FROM evaluation_outbox WHERE batch_submission_id IS NOT NULL AND status = 'processing'").await,
            3,
            "{api:?}: in the batch's care"
        );
        // The next ones collect it: one line answered at the batch price, two back online.
        app.drain(&worker, Duration::from_secs(20)).await;
        assert_eq!(outbox_done(&app).await, 4, "{api:?}");
        assert_eq!(fake.batches().len(), 1, "{api:?}: nothing sent twice");
        let outcomes = |tier: &str| {
            format!("SELECT count(*) FROM provider_call WHERE tier = '{tier}' AND lane = 'bulk' AND outcome = ")
        };
        assert_eq!(app.count(&(outcomes("batch") + "'ok'")).await, 1, "{api:?}");
        assert_eq!(
            app.count(&(outcomes("batch") + "'not_run'")).await,
            1,
            "{api:?}"
        );
        assert_eq!(
            app.count(&(outcomes("batch") + "'server_error'")).await,
            1,
            "{api:?}"
        );
        assert_eq!(
            app.count(&(outcomes("online") + "'ok'")).await,
            2,
            "{api:?}"
        );
        assert_eq!(
            app.count("SELECT count(*) FROM evaluation_outbox WHERE attempts > 1")
                .await,
            0,
            "{api:?}: lines that fell back spent no attempt"
        );
        let (usage, cost) = answered_call(&app, "batch").await;
        let prices = &app.config.provider.prices;
        let batch = prices.cost("gpt-6-luna", usage, Tier::Batch);
        assert!((cost - batch).abs() < 1e-8, "{api:?}: {cost} != {batch}");
        assert!(
            fake.billed_by_content().values().all(|n| *n == 1),
            "{api:?}: billed = unique"
        );
        // Cost per evaluated ticket: every call counted, by version, lane and tier.
        let health = report::health(&app.pool, claim::Serves::Models, None)
            .await
            .unwrap();
        let batched = health
            .cost_per_task
            .iter()
            .find(|g| g.tier == "batch")
            .unwrap();
        assert_eq!(
            (batched.prompt_version.as_str(), batched.lane.as_str()),
            ("triage-v3", "bulk")
        );
        assert_eq!((batched.calls, batched.evaluated), (3, 1), "{api:?}");
        assert!((batched.cost_per_ticket_usd.unwrap() - cost).abs() < 1e-8);
        let spent: f64 = health.cost_per_task.iter().map(|g| g.cost_usd).sum();
        let per_ticket = health.cost_per_ticket_usd.unwrap();
        assert!(
            (per_ticket - spent / 4.0).abs() < 1e-12,
            "{api:?}: {per_ticket}"
        );
        assert!(health.month_projection_usd > 0.0);
    }
}

#[tokio::test]
async fn a_batch_a_worker_submitted_is_collected_by_the_sweepers_ticks_while_no_worker_runs() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let (fake, app) = one_batch_sent(api).await;
        let deadline = Instant::now() + Duration::from_secs(5);
        let sweeper = Sweeper::new(app.pool.clone(), app.config.clone()).unwrap();
        // A worker polling it meanwhile holds it: the tick leaves it alone.
        app.exec("UPDATE batch_submission SET polled_until = now() + interval '1 minute'")
            .await;
        let report = sweeper.tick(deadline).await.unwrap().batches;
        assert_eq!(report, Default::default(), "{api:?}");
        app.exec("UPDATE batch_submission SET polled_until = NULL")
            .await;
        // A tick out of time leaves it to the next, free to be polled.
        let report = sweeper.tick(Instant::now()).await.unwrap().batches;
        assert_eq!(report, Default::default(), "{api:?}");
        let free = "SELECT count(*) FROM batch_submission WHERE polled_until IS NULL AND state = 'submitted'";
        assert_eq!(app.count(free).await, 1, "{api:?}");

        let report = sweeper.tick(deadline).await.unwrap().batches;
        assert_eq!(
            (report.collected, report.lines_evaluated, report.submitted),
            (1, 3, 0),
            "{api:?}"
        );
        let bulk_done =
            "SELECT count(*) FROM evaluation_outbox WHERE lane = 'bulk' AND status = 'done'";
        assert_eq!(app.count(bulk_done).await, 3, "{api:?}");
        assert_eq!(
            app.count("SELECT count(*) FROM evaluation_result r JOIN evaluation_outbox o USING (idempotency_key) WHERE o.lane = 'bulk'").await,
            3,
            "{api:?}: each result stored"
        );
        let client = app.pool.get().await.unwrap();
        let lines = client
            .query(
                "SELECT input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, \
                 cost_usd::float8 FROM provider_call \
                 WHERE tier = 'batch' AND outcome = 'ok' AND billed",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(lines.len(), 3, "{api:?}");
        for line in lines {
            let usage = Usage {
                input_tokens: line.get(0),
                cached_input_tokens: line.get(1),
                cache_write_tokens: line.get(2),
                output_tokens: line.get(3),
            };
            let (cost, prices) = (line.get::<_, f64>(4), &app.config.provider.prices);
            let batch_price = prices.cost("gpt-6-luna", usage, Tier::Batch);
            assert!(
                (cost - batch_price).abs() < 1e-8,
                "{api:?}: {cost} != {batch_price}"
            );
        }
        // The next tick finds nothing to do; nothing was sent twice, nothing billed twice.
        let report = sweeper.tick(deadline).await.unwrap().batches;
        assert_eq!(report, Default::default(), "{api:?}");
        collected_once(&app, &fake, api).await;
    }
}

/// Found by `scripts/bench cost`: a 1,000-line batch beside 20,000 calls of the day was never
/// collected, its read of the lines' ledger rows timing out on every tick (a scan of the
/// ledger per line).
#[tokio::test]
async fn a_large_batch_is_read_for_collection_beside_a_full_ledger_within_the_statement_timeout() {
    let fake = FakeProvider::start().await;
    let app = batch_app(&fake, Api::OpenAi, None).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    assert_eq!(
        app.worker().tend_batches(deadline).await.unwrap().submitted,
        1
    );
    // The day's other calls (the running totals left out: a fill, not the subject), and a
    // thousand more lines in the submission; then the pool's statement timeout, shortened.
    let client = app.pool.get().await.unwrap();
    client
        .batch_execute(
            "SET statement_timeout = 0;
             ALTER TABLE provider_call DISABLE TRIGGER provider_call_hour_add;
             INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider,
                                        model_version, prompt_version)
             SELECT -g, md5(g::text), 1, 'other', 'openai', 'gpt-6-luna@medium', 'triage-v3'
             FROM generate_series(1, 100000) g;
             ALTER TABLE provider_call ENABLE TRIGGER provider_call_hour_add;
             WITH t AS (
                 INSERT INTO ticket (id, subject, message)
                 SELECT gen_random_uuid(), 'line ' || g, 'body' FROM generate_series(1, 1000) g
                 RETURNING id
             )
             INSERT INTO evaluation_outbox (ticket_id, idempotency_key, prompt_version,
                 model_version, status, attempts, claim_token, lane, batch_submission_id)
             SELECT id, md5(id::text), 'triage-v3', 'gpt-6-luna@medium', 'processing', 1,
                    gen_random_uuid(), 'bulk', (SELECT id FROM batch_submission)
             FROM t;
             ANALYZE;
             SET statement_timeout = '1s'",
        )
        .await
        .unwrap();
    let id = SubmissionId(app.count("SELECT id FROM batch_submission").await);
    let jobs = submission::jobs(&client, id).await.unwrap();
    assert_eq!(jobs.len(), 1003);
    let with_rows = jobs.iter().filter(|(_, call)| call.is_some()).count();
    assert_eq!(
        with_rows, 3,
        "the submitted lines' ledger rows, and only theirs"
    );
}

#[tokio::test]
async fn batch_lines_leave_the_online_breaker_alone_so_an_open_one_stays_open_while_they_complete()
{
    for api in [Api::OpenAi, Api::Anthropic] {
        let (_fake, app) = one_batch_sent(api).await;
        let worker = app.worker();
        let deadline = Instant::now() + Duration::from_secs(5);
        // The online endpoint went down meanwhile: the breaker is open for online calls.
        let provider = match api {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        };
        app.exec(&format!(
            "INSERT INTO provider_breaker (provider, state, consecutive_failures, trips, open_until) \
             VALUES ('{provider}', 'open', 5, 1, now() + interval '1 hour')"
        ))
        .await;
        let report = worker.collect_batches(deadline).await.unwrap();
        assert_eq!(report.lines_evaluated, 3, "{api:?}");
        let breaker = app
            .row("SELECT state, consecutive_failures, trips, coalesce(open_until > now(), false) FROM provider_breaker")
            .await;
        assert_eq!(
            (
                breaker.get::<_, String>(0),
                breaker.get::<_, i32>(1),
                breaker.get::<_, i32>(2),
                breaker.get::<_, bool>(3)
            ),
            ("open".into(), 5, 1, true),
            "{api:?}: a batch answer is no proof the online endpoint is up"
        );
    }
}

#[tokio::test]
async fn a_batch_lines_ledger_row_takes_no_slot_and_is_not_written_for_a_key_with_a_result() {
    let app = spawn_app().await;
    let client = app.pool.get().await.unwrap();
    let caller = ("w", "openai");
    let job = app.claimed("Batched").await;
    let call = ledger::start_without_slot(&client, &job, caller, 0.1, Tier::Batch)
        .await
        .unwrap();
    assert!(call.is_some());
    let rows = "SELECT count(*) FROM provider_call WHERE tier = 'batch' AND outcome = 'in_flight'";
    assert_eq!(app.count(rows).await, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM provider_rate_limit").await,
        0,
        "no slot"
    );

    let evaluated = app.claimed("Already evaluated").await;
    app.exec(&format!(
        "INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department, \
         urgency_score, model_version, prompt_version, policy_version) \
         VALUES ('{}', '{}', 0, 'billing', 0, 'm', 'p', 'v')",
        evaluated.key.as_str(),
        evaluated.ticket_id.0
    ))
    .await;
    let call = ledger::start_without_slot(&client, &evaluated, caller, 0.1, Tier::Batch)
        .await
        .unwrap();
    assert_eq!(call, None);
    assert_eq!(app.count(rows).await, 1);
}
