//! Lanes and the bulk tiers on a real PostgreSQL: new tickets are claimed before bulk work,
//! which takes at most its share of a claim while they wait; reprocess and redrive enqueue
//! bulk work unless their operator chooses the interactive lane; bulk calls on flex are priced at
//! the flex rate, and flex's 429s spend no attempt and hold no one else off; bulk work in provider batches completes at the batch price,
//! falls back online line by line, is never submitted twice after a crash, and is read for
//! collection by key, not by a scan of the ledger per line.

use std::time::{Duration, Instant};

use fake_provider::{Api, Behavior, FakeProvider, Flex};
use serde_json::json;
use triage::{
    pipeline::{
        ledger,
        outbox::{
            claim,
            submission::{self, SubmissionId},
            Lane, Lanes,
        },
        reads::report,
        sweep::Sweeper,
    },
    providers::{PriceTable, ProviderKind, Tier, Usage},
};

use crate::{
    helpers::operations::op,
    helpers::{spawn_app, spawn_app_with_fake, TestApp},
};

async fn post_many(app: &TestApp, prefix: &str, n: usize) {
    for i in 0..n {
        assert_eq!(
            app.post_ticket(&format!("{prefix} {i}"), "body")
                .await
                .status,
            201
        );
    }
}

async fn claim_lanes(app: &TestApp, batch: i64, share: f64) -> Vec<Lane> {
    let client = app.pool.get().await.unwrap();
    let lease = Duration::from_secs(60);
    let lanes = Lanes {
        bulk_share: share,
        ..Lanes::default()
    };
    claim::claim(&client, "w", batch, lease, claim::Serves::RulesOnly, lanes)
        .await
        .unwrap()
        .into_iter()
        .map(|job| job.lane)
        .collect()
}

/// The usage and cost the ledger holds for the answered call on `tier`.
async fn answered_call(app: &TestApp, tier: &str) -> (Usage, f64) {
    let call = app
        .row(&format!(
            "SELECT input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, \
             cost_usd::float8 FROM provider_call WHERE tier = '{tier}' AND outcome = 'ok'"
        ))
        .await;
    let usage = Usage {
        input_tokens: call.get(0),
        cached_input_tokens: call.get(1),
        cache_write_tokens: call.get(2),
        output_tokens: call.get(3),
    };
    (usage, call.get(4))
}

fn count(lanes: &[Lane], lane: Lane) -> usize {
    lanes.iter().filter(|l| **l == lane).count()
}

#[tokio::test]
async fn new_tickets_are_claimed_first_and_bulk_work_takes_at_most_its_share_while_they_wait() {
    let app = spawn_app().await;
    post_many(&app, "backlog", 12).await;
    app.exec(
        "UPDATE evaluation_outbox SET lane = 'bulk', available_at = now() - interval '1 hour'",
    )
    .await;
    post_many(&app, "new", 3).await;
    // The bulk backlog is older, yet the three new tickets come first; bulk gets half the claim.
    let first = claim_lanes(&app, 10, 0.5).await;
    assert_eq!(first[..3], [Lane::Interactive; 3]);
    assert_eq!(
        (count(&first, Lane::Interactive), count(&first, Lane::Bulk)),
        (3, 5)
    );
    // No new ticket waits: bulk may take the whole claim.
    let second = claim_lanes(&app, 10, 0.5).await;
    assert_eq!(
        (
            count(&second, Lane::Interactive),
            count(&second, Lane::Bulk)
        ),
        (0, 7)
    );

    let app = spawn_app().await;
    post_many(&app, "backlog", 4).await;
    app.exec("UPDATE evaluation_outbox SET lane = 'bulk'").await;
    post_many(&app, "new", 12).await;
    // Interactive work filling the claim leaves bulk nothing; a zero share, nothing either.
    assert_eq!(count(&claim_lanes(&app, 10, 0.5).await, Lane::Bulk), 0);
    assert_eq!(claim_lanes(&app, 10, 0.0).await, [Lane::Interactive; 2]);
    assert_eq!(claim_lanes(&app, 10, 0.0).await, [Lane::Bulk; 4]);
}

#[tokio::test]
async fn reprocess_and_redrive_put_their_work_in_the_bulk_lane() {
    let app = spawn_app().await;
    post_many(&app, "ticket", 3).await;
    let lanes = "SELECT count(*) FROM evaluation_outbox WHERE lane = 'bulk'";
    assert_eq!(app.count(lanes).await, 0, "ingest is interactive");
    let report = op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v4", "spread": "0s"}),
    )
    .await;
    assert_eq!(report["inserted"], 3);
    assert_eq!(app.count(lanes).await, 3);

    app.exec("UPDATE evaluation_outbox SET status = 'dead', lane = 'interactive', finished_at = now(), error_class = 'timeout' WHERE prompt_version = 'triage-v3'")
        .await;
    assert_eq!(
        op(&app, json!({"op": "redrive", "spread": "0s"})).await["moved"],
        3
    );
    assert_eq!(app.count(lanes).await, 6);
}

#[tokio::test]
async fn a_reprocess_or_redrive_an_operator_puts_in_the_interactive_lane_is_claimed_ahead_of_bulk_work(
) {
    let app = spawn_app().await;
    post_many(&app, "ticket", 3).await;
    // Dead letters to redrive, and an older bulk backlog (a reprocess in its default lane).
    app.exec("UPDATE evaluation_outbox SET status = 'dead', finished_at = now(), error_class = 'timeout'")
        .await;
    let backlog = op(
        &app,
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v4", "spread": "0s"}),
    )
    .await;
    assert_eq!(backlog["inserted"], 3);
    app.exec("UPDATE evaluation_outbox SET available_at = now() - interval '1 hour' WHERE status = 'pending'")
        .await;
    let urgent = json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v5", "spread": "0s", "lane": "interactive"});
    assert_eq!(op(&app, urgent).await["inserted"], 3);
    let redrive = json!({"op": "redrive", "spread": "0s", "lane": "interactive"});
    assert_eq!(op(&app, redrive).await["moved"], 3);

    // No share for bulk while interactive work waits: the six chosen jobs first, then the
    // older backlog.
    assert_eq!(claim_lanes(&app, 10, 0.0).await, [Lane::Interactive; 6]);
    assert_eq!(claim_lanes(&app, 10, 0.0).await, [Lane::Bulk; 3]);
    let chosen = "SELECT count(*) FROM evaluation_outbox WHERE lane = 'interactive' \
                  AND prompt_version IN ('triage-v3', 'triage-v5') AND locked_by = 'w'";
    assert_eq!(app.count(chosen).await, 6);
    // The audit trail names the lane each chose.
    let audited = app
        .count("SELECT count(*) FROM operation_audit WHERE parameters->>'lane' = 'interactive'")
        .await;
    assert_eq!(audited, 2);
}

#[tokio::test]
async fn bulk_work_on_flex_is_priced_at_the_flex_rate_and_its_429_spends_no_attempt() {
    let fake = FakeProvider::start().await;
    fake.set_strict(true);
    fake.set_flex(Flex {
        delay: Duration::ZERO,
        unavailable_every: 1,
    });
    let app = spawn_app_with_fake(&fake, |config| {
        config.worker.bulk_tier = Tier::Flex;
        config.provider.prices = PriceTable::parse("gpt-6-luna=1/0.1/4, batch=0.5").unwrap();
    })
    .await;
    post_many(&app, "bulk", 1).await;
    app.exec("UPDATE evaluation_outbox SET lane = 'bulk'").await;
    post_many(&app, "new", 1).await;
    let worker = app.worker();
    // Every flex call is refused: the bulk job goes back with its attempt, the new ticket is
    // evaluated online meanwhile, held off by nothing.
    let report = app.run_worker_once(&worker).await;
    assert!(report.claimed >= 2, "{report:?}");
    let row = app
        .row("SELECT status, attempts, lane FROM evaluation_outbox WHERE lane = 'bulk'")
        .await;
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, i32>(1)),
        ("pending".into(), 0)
    );
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE lane = 'interactive' AND status = 'done'"
        )
        .await,
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM provider_call WHERE tier = 'flex' AND lane = 'bulk' AND outcome = 'rate_limited'").await,
        1
    );
    assert!(fake
        .calls()
        .iter()
        .any(|c| c.body["service_tier"] == "flex"));

    // Flex has room again: the bulk job is answered at the flex price, its cached prefix too.
    fake.set_flex(Flex::default());
    app.drain(&worker, Duration::from_secs(20)).await;
    let (usage, cost) = answered_call(&app, "flex").await;
    assert!(
        usage.cached_input_tokens > 0,
        "the prompt prefix was seen before: {usage:?}"
    );
    let prices = &app.config.provider.prices;
    let flex = prices.cost("gpt-6-luna", usage, Tier::Flex);
    assert!((cost - flex).abs() < 1e-8, "{cost} != {flex} for {usage:?}");
    assert!(cost < prices.cost("gpt-6-luna", usage, Tier::Online));
    let online: f64 = app
        .row("SELECT cost_usd::float8 FROM provider_call WHERE tier = 'online' AND outcome = 'ok'")
        .await
        .get(0);
    assert!(online > 0.0);
}

/// An app whose bulk lane goes to `api`'s batches on `fake`, with three bulk tickets waiting
/// (subjects "bulk 0" to "bulk 2") and one new ticket.
pub(crate) async fn batch_app(fake: &FakeProvider, api: Api, budget_usd: Option<f64>) -> TestApp {
    fake.set_strict(true);
    let app = spawn_app_with_fake(fake, |config| {
        config.worker.bulk_tier = Tier::Batch;
        config.worker.daily_budget_usd = budget_usd;
        config.provider.prices = PriceTable::parse("gpt-6-luna=1/0.1/4, batch=0.5").unwrap();
        if api == Api::Anthropic {
            config.provider.kind = ProviderKind::Anthropic;
        }
    })
    .await;
    post_many(&app, "bulk", 3).await;
    app.exec("UPDATE evaluation_outbox SET lane = 'bulk'").await;
    post_many(&app, "new", 1).await;
    app
}

/// Every submission's state, oldest first.
async fn submission_states(client: &deadpool_postgres::Client) -> Vec<String> {
    client
        .query("SELECT state FROM batch_submission ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// [`batch_app`] on `api`, whose bulk lane a worker has just sent as one batch.
pub(crate) async fn one_batch_sent(api: Api) -> (FakeProvider, TestApp) {
    let fake = FakeProvider::start().await;
    let app = batch_app(&fake, api, None).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let report = app.worker().tend_batches(deadline).await.unwrap();
    assert_eq!(report.submitted, 1, "{api:?}");
    (fake, app)
}

async fn outbox_done(app: &TestApp) -> i64 {
    app.count("SELECT count(*) FROM evaluation_outbox WHERE status = 'done'")
        .await
}

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
async fn a_worker_killed_between_sending_a_batch_and_recording_it_leads_to_no_second_submission() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let (fake, app) = one_batch_sent(api).await;
        let worker = app.worker();
        let deadline = Instant::now() + Duration::from_secs(5);
        // What a worker killed after the provider accepted the batch, before it recorded the
        // answer, leaves behind: a submission still 'sending', without the provider's id.
        app.exec("UPDATE batch_submission SET state = 'sending', provider_batch_id = NULL, submitted_at = NULL, created_at = now() - interval '1 hour', send_started_at = now() - interval '1 hour'")
            .await;
        let report = worker.tend_batches(deadline).await.unwrap();
        assert_eq!(
            (report.adopted, report.collected, report.submitted),
            (1, 1, 0),
            "{api:?}"
        );
        assert_eq!(fake.batches().len(), 1, "{api:?}: adopted, not sent again");
        app.drain(&worker, Duration::from_secs(20)).await;
        assert_eq!(outbox_done(&app).await, 4, "{api:?}");
        collected_once(&app, &fake, api).await;
    }
}

/// The one batch was sent once, collected, and each content billed once.
async fn collected_once(app: &TestApp, fake: &FakeProvider, api: Api) {
    assert_eq!(fake.batches().len(), 1, "{api:?}: nothing sent twice");
    assert!(
        fake.billed_by_content().values().all(|n| *n == 1),
        "{api:?}: billed = unique"
    );
    let state: String = app.row("SELECT state FROM batch_submission").await.get(0);
    assert_eq!(state, "collected", "{api:?}");
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
    let lease_ends = Instant::now() + Duration::from_secs(60);
    let jobs = submission::jobs(&client, id, lease_ends).await.unwrap();
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

#[tokio::test]
async fn a_submission_the_provider_never_received_gives_its_jobs_back_to_the_next_batch() {
    let fake = FakeProvider::start().await;
    let app = batch_app(&fake, Api::OpenAi, None).await;
    // A submission recorded by a worker that died before sending it.
    app.exec(
        "WITH s AS (INSERT INTO batch_submission (provider, worker, lines, created_at) \
         VALUES ('openai', 'dead', 3, now() - interval '1 hour') RETURNING id) \
         UPDATE evaluation_outbox SET status = 'processing', attempts = 1, claim_token = gen_random_uuid(), \
         locked_until = now() + interval '1 day', batch_submission_id = (SELECT id FROM s) WHERE lane = 'bulk'",
    )
    .await;
    let worker = app.worker();
    let deadline = Instant::now() + Duration::from_secs(5);
    let report = worker.tend_batches(deadline).await.unwrap();
    assert_eq!((report.adopted, report.submitted), (0, 1));
    assert_eq!(fake.batches().len(), 1);
    assert_eq!(fake.batches()[0].custom_ids.len(), 3);
    let client = app.pool.get().await.unwrap();
    assert_eq!(submission_states(&client).await, ["abandoned", "submitted"]);
}

/// A send slower than `sending_for` looks lost to the next tick, which gives its submission up
/// and queues its jobs again; the batch the sender then makes would be paid for a second time.
/// Here another worker gives it up the moment the send begins (a trigger on the send's mark).
#[tokio::test]
async fn a_batch_sent_after_its_submission_was_given_up_is_cancelled_so_its_contents_are_paid_once()
{
    let fake = FakeProvider::start().await;
    fake.set_batch_delay(Duration::from_secs(3600));
    let app = batch_app(&fake, Api::OpenAi, None).await;
    app.exec(
        "CREATE FUNCTION give_up() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           NEW.state := 'abandoned'; \
           UPDATE evaluation_outbox SET status = 'pending', locked_by = NULL, locked_until = NULL, \
             claim_token = NULL, batch_submission_id = NULL WHERE batch_submission_id = NEW.id; \
           RETURN NEW; END $$; \
         CREATE TRIGGER give_up BEFORE UPDATE OF send_started_at ON batch_submission \
           FOR EACH ROW EXECUTE FUNCTION give_up();",
    )
    .await;
    let worker = app.worker();
    let deadline = Instant::now() + Duration::from_secs(5);
    let report = worker.tend_batches(deadline).await.unwrap();
    assert_eq!(report.submitted, 0);
    let made = fake.batches();
    assert_eq!(made.len(), 1);
    assert!(
        made[0].cancelled,
        "the given-up submission's batch is cancelled"
    );
    let first_input = fake.holding("bulk 0");
    assert_eq!(first_input.len(), 1);
    // Its jobs go out once more, in a batch of their own, which is the one that runs; the
    // cancelled batch, ended meanwhile, has its input file deleted.
    app.exec("DROP TRIGGER give_up ON batch_submission").await;
    let report = worker.tend_batches(deadline).await.unwrap();
    assert_eq!((report.submitted, report.deleted_at_provider), (1, 1));
    let made = fake.batches();
    assert_eq!(made.len(), 2);
    assert!(!made[1].cancelled);
    assert_eq!(made[1].custom_ids.len(), 3);
    let held = fake.holding("bulk 0");
    assert_eq!(held.len(), 1, "the running batch's input file only");
    assert_ne!(held, first_input);
}

#[tokio::test]
async fn a_submission_its_sender_recorded_is_not_given_up_and_one_given_up_is_not_recorded() {
    let fake = FakeProvider::start().await;
    let app = batch_app(&fake, Api::OpenAi, None).await;
    let client = app.pool.get().await.unwrap();
    let record = "INSERT INTO batch_submission (provider, worker, lines) VALUES ('openai', 'w', 3) RETURNING id";
    let sent = SubmissionId(client.query_one(record, &[]).await.unwrap().get(0));
    assert!(submission::submitted(&client, sent, "batch_sent")
        .await
        .unwrap());
    assert!(!submission::close(&client, sent, false).await.unwrap());
    let lost = SubmissionId(client.query_one(record, &[]).await.unwrap().get(0));
    assert!(submission::close(&client, lost, false).await.unwrap());
    assert!(!submission::submitted(&client, lost, "batch_late")
        .await
        .unwrap());
    assert_eq!(submission_states(&client).await, ["submitted", "abandoned"]);
}

#[tokio::test]
async fn a_spent_daily_budget_cancels_the_running_batch_and_its_lines_come_back_unbilled() {
    let fake = FakeProvider::start().await;
    fake.set_batch_delay(Duration::from_secs(3600));
    let app = batch_app(&fake, Api::OpenAi, Some(1.0)).await;
    let worker = app.worker();
    let deadline = Instant::now() + Duration::from_secs(5);
    // Each line is held against the budget at its own estimate: all three fit.
    assert_eq!(worker.tend_batches(deadline).await.unwrap().submitted, 1);
    assert_eq!(fake.batches()[0].custom_ids.len(), 3);
    // The day's spend reaches the budget while the batch runs.
    app.exec(
        "INSERT INTO provider_call (outbox_id, idempotency_key, attempt, worker, provider, \
         model_version, prompt_version, outcome, billed, cost_usd) \
         VALUES (0, 'spent', 1, 'w', 'openai', 'gpt-6-luna@medium', 'triage-v3', 'ok', true, 2)",
    )
    .await;
    let report = worker.tend_batches(deadline).await.unwrap();
    assert_eq!((report.cancelled, report.submitted), (1, 0));
    assert!(fake.batches()[0].cancelled);
    app.exec("UPDATE batch_submission SET polled_until = NULL")
        .await;
    let report = worker.tend_batches(deadline).await.unwrap();
    assert_eq!((report.collected, report.lines_back_online), (1, 3));
    assert!(fake.billed_calls().iter().all(|c| c.batch.is_none()));
    assert_eq!(
        app.count(
            "SELECT count(*) FROM evaluation_outbox WHERE online_only AND status = 'pending'"
        )
        .await,
        3
    );
}
