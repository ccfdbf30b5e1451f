//! What the provider keeps of a batch's text (OpenAI's input, output and error files,
//! Anthropic's message batch) is deleted once the batch is collected, a deletion that fails
//! is tried again by the next tick, and erasing a ticket whose text a running batch holds
//! names that batch and the time by which it is deleted; on the fake provider's Files and
//! Batches endpoints.

use std::time::{Duration, Instant};

use fake_provider::{Api, FakeProvider};
use serde_json::json;

use crate::{
    helpers::operations::op,
    helpers::TestApp,
    lanes::{batch_app, one_batch_sent},
};

async fn ticket_id(app: &TestApp, subject: &str) -> String {
    app.row(&format!(
        "SELECT id::text FROM ticket WHERE subject = '{subject}'"
    ))
    .await
    .get(0)
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

#[tokio::test]
async fn a_collected_batchs_text_is_deleted_at_the_provider_and_a_failed_deletion_is_tried_again() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let (fake, app) = one_batch_sent(api).await;
        assert!(!fake.holding("bulk 0").is_empty(), "{api:?}: sent");
        // Collected while the provider refuses deletions: the text stays, and so does the
        // record that it does.
        fake.set_deletes_fail(true);
        let worker = app.worker();
        let report = worker.collect_batches(soon()).await.unwrap();
        assert_eq!(
            (report.collected, report.deleted_at_provider),
            (1, 0),
            "{api:?}"
        );
        for subject in ["bulk 0", "bulk 1", "bulk 2"] {
            assert!(!fake.holding(subject).is_empty(), "{api:?}: {subject}");
        }
        let undeleted = "SELECT count(*) FROM batch_submission \
                         WHERE state = 'collected' AND provider_deleted_at IS NULL";
        assert_eq!(app.count(undeleted).await, 1, "{api:?}");
        // The next tick deletes every copy: input, output and error files, or the batch.
        fake.set_deletes_fail(false);
        let report = worker.collect_batches(soon()).await.unwrap();
        assert_eq!(
            (report.collected, report.deleted_at_provider),
            (0, 1),
            "{api:?}"
        );
        for subject in ["bulk 0", "bulk 1", "bulk 2"] {
            assert_eq!(
                fake.holding(subject),
                Vec::<String>::new(),
                "{api:?}: {subject}"
            );
        }
        assert_eq!(app.count(undeleted).await, 0, "{api:?}");
        if api == Api::Anthropic {
            assert!(fake.batches()[0].deleted, "the message batch itself");
        }
        // And then nothing is left to tend.
        let report = worker.collect_batches(soon()).await.unwrap();
        assert_eq!(report, Default::default(), "{api:?}");
    }
}

#[tokio::test]
async fn erasing_a_ticket_a_running_batch_holds_names_the_batch_and_its_text_goes_once_the_batch_ends(
) {
    for api in [Api::OpenAi, Api::Anthropic] {
        let fake = FakeProvider::start().await;
        fake.set_batch_delay(Duration::from_secs(3600));
        let app = batch_app(&fake, api, None).await;
        let worker = app.worker();
        assert_eq!(worker.tend_batches(soon()).await.unwrap().submitted, 1);
        let batch = fake.batches()[0].id.clone();

        let erased = op(
            &app,
            json!({"op": "erase", "ticket_ids": [ticket_id(&app, "bulk 0").await]}),
        )
        .await;
        assert_eq!(erased["tickets"], 1, "{api:?}");
        let held = erased["held_at_provider"].as_array().unwrap();
        assert_eq!(held.len(), 1, "{api:?}: {erased}");
        assert_eq!(held[0]["batch"], batch.as_str(), "{api:?}");
        // At the latest when the batch's 24-hour window and its collection are over.
        let by = held[0]["deleted_by"].as_str().unwrap();
        let expected: String = app
            .row(
                "SELECT to_char((created_at + interval '25 hours') AT TIME ZONE 'UTC', \
                  'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM batch_submission",
            )
            .await
            .get(0);
        assert_eq!(by, expected, "{api:?}");
        assert!(!fake.holding("bulk 0").is_empty(), "{api:?}: still running");

        // The batch ends; the tick after collects the other two lines and deletes it all.
        fake.set_batch_delay(Duration::ZERO);
        let report = worker.collect_batches(soon()).await.unwrap();
        assert_eq!(
            (
                report.collected,
                report.lines_evaluated,
                report.deleted_at_provider
            ),
            (1, 2, 1),
            "{api:?}"
        );
        assert_eq!(fake.holding("bulk 0"), Vec::<String>::new(), "{api:?}");
        assert_eq!(fake.holding("bulk 1"), Vec::<String>::new(), "{api:?}");

        // An erasure after that has nothing at the provider to report.
        let erased = op(
            &app,
            json!({"op": "erase", "ticket_ids": [ticket_id(&app, "bulk 1").await]}),
        )
        .await;
        assert_eq!(erased["held_at_provider"], json!([]), "{api:?}");
    }
}
