//! Delivery through AWS: results reach an SQS queue through an EventBridge rule (moto), and
//! template.yaml wires the deliverer's doorbell queue.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::helpers::{
    spawn_app_with,
    webhooks::{fast_delivery, ingest},
};

#[tokio::test]
async fn every_result_reaches_an_sqs_queue_through_an_eventbridge_rule() {
    let Some(moto) = testkit::moto::aws_env() else {
        return;
    };
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let bus = format!("triage-{suffix}");
    testkit::moto::aws(&moto, &["events", "create-event-bus", "--name", &bus]);
    let queue_url = testkit::moto::aws(
        &moto,
        &[
            "sqs",
            "create-queue",
            "--queue-name",
            &format!("routed-{suffix}"),
        ],
    )["QueueUrl"]
        .as_str()
        .unwrap()
        .to_string();
    let queue_arn = testkit::moto::aws(
        &moto,
        &[
            "sqs",
            "get-queue-attributes",
            "--queue-url",
            &queue_url,
            "--attribute-names",
            "QueueArn",
        ],
    )["Attributes"]["QueueArn"]
        .as_str()
        .unwrap()
        .to_string();
    let pattern = json!({"source": ["triage"], "detail-type": ["TicketEvaluated"]}).to_string();
    testkit::moto::aws(
        &moto,
        &[
            "events",
            "put-rule",
            "--name",
            "to-queue",
            "--event-bus-name",
            &bus,
            "--event-pattern",
            &pattern,
        ],
    );
    testkit::moto::aws(
        &moto,
        &[
            "events",
            "put-targets",
            "--rule",
            "to-queue",
            "--event-bus-name",
            &bus,
            "--targets",
            &format!("Id=queue,Arn={queue_arn}"),
        ],
    );

    let app = spawn_app_with(|config| {
        fast_delivery(config);
        config.delivery.event_bus = Some(bus.clone());
    })
    .await;
    let mut tickets = Vec::new();
    // More than one PutEvents batch.
    for i in 0..13 {
        tickets.push(ingest(&app, None, &format!("Invoice {i} charged twice")).await);
    }
    // The bus subscription is made by the first invocation of a deliverer that serves it.
    let eventbridge = triage::aws::eventbridge::EventBridge::from_lookup(|name| {
        moto.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    })
    .unwrap();
    let deliverer = app.deliverer().with_bus(Arc::new(eventbridge));
    deliverer
        .run_invocation(
            Instant::now() + Duration::from_secs(5),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    app.drain(&app.worker(), Duration::from_secs(10)).await;
    assert_eq!(app.count("SELECT count(*) FROM delivery").await, 13);
    let report = deliverer
        .run_invocation(
            Instant::now() + Duration::from_secs(10),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.delivered, 13, "{report:?}");

    let mut routed = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while routed.len() < 13 && Instant::now() < until {
        let answer = testkit::moto::aws(
            &moto,
            &[
                "sqs",
                "receive-message",
                "--queue-url",
                &queue_url,
                "--max-number-of-messages",
                "10",
            ],
        );
        for message in answer["Messages"].as_array().into_iter().flatten() {
            routed.push(serde_json::from_str::<Value>(message["Body"].as_str().unwrap()).unwrap());
        }
    }
    let mut ids: Vec<String> = routed
        .iter()
        .map(|event| {
            assert_eq!(event["source"], "triage");
            assert_eq!(event["detail-type"], "TicketEvaluated");
            assert!(event["detail"]["event_id"]
                .as_str()
                .unwrap()
                .starts_with("evt_"));
            event["detail"]["ticket_id"].as_str().unwrap().to_string()
        })
        .collect();
    ids.sort();
    tickets.sort();
    assert_eq!(ids, tickets);
}

/// The template's resource `name`: its lines up to the next resource.
fn resource<'a>(template: &'a str, name: &str) -> &'a str {
    let rest = template
        .split(&format!("\n  {name}:\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {name} in template.yaml"));
    let end = rest
        .lines()
        .position(|l| l.len() > 2 && !l.starts_with("   ") && !l.starts_with("  #"))
        .map_or(rest.len(), |n| {
            rest.lines().take(n).map(|l| l.len() + 1).sum()
        });
    &rest[..end]
}

#[test]
fn the_deliverers_doorbell_is_rung_by_the_scaler_and_read_by_the_deliverer_alone() {
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
    let deliverer = resource(&template, "DelivererFunction");
    let reads = "sqs:ReceiveMessage";
    let statement = deliverer
        .split("- Effect: Allow")
        .find(|s| s.contains(reads))
        .expect("the deliverer reads its doorbell");
    assert!(
        statement.contains("Resource: !GetAtt DelivererDoorbellQueue.Arn"),
        "{statement}"
    );
    assert!(!deliverer.contains("DoorbellQueue.Arn]"), "{deliverer}");
    let mapping = resource(&template, "DelivererDoorbell");
    for line in [
        "FunctionName: !Ref DelivererFunction",
        "EventSourceArn: !GetAtt DelivererDoorbellQueue.Arn",
        "BatchSize: 1",
        "MaximumConcurrency: !Ref MaxDelivererConcurrency",
    ] {
        assert!(mapping.contains(line), "no {line:?} in:\n{mapping}");
    }
    // The worker reads its own queue and never the deliverers'.
    let worker = resource(&template, "WorkerFunction");
    assert!(!worker.contains("DelivererDoorbellQueue"), "{worker}");
    let scaler = resource(&template, "ScalerFunction");
    for line in [
        "TRIAGE_DELIVERER_QUEUE_URL: !Ref DelivererDoorbellQueue",
        "TRIAGE_MAX_DELIVERERS: !Ref MaxDelivererConcurrency",
        "Resource: [!GetAtt DoorbellQueue.Arn, !GetAtt DelivererDoorbellQueue.Arn]",
    ] {
        assert!(scaler.contains(line), "no {line:?} in:\n{scaler}");
    }
    assert!(!scaler.contains(reads), "the scaler only sends");
}
