//! Batch submissions: never submitted twice after a crash, given back when the provider
//! never received them, cancelled when sent after being given up, and cancelled by a
//! spent daily budget with their lines unbilled.

use std::time::{Duration, Instant};

use fake_provider::{Api, FakeProvider};
use triage::pipeline::outbox::submission::{self, SubmissionId};

use super::{batch_app, collected_once, one_batch_sent, outbox_done};

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
