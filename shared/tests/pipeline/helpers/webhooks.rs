//! Webhooks: receivers over loopback that answer as a test scripts them and keep what they
//! received, subscriptions, tickets of a given owner, and deliverers run to the end.

use std::{
    collections::BTreeMap,
    io::Write,
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
    Router,
};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use triage::{
    config::Config,
    pipeline::{
        delivery::{subscription, Deliverer},
        ingest::{self, NewTicket, Submitter},
    },
};

use super::{fast_policy, TestApp};

/// What a receiver answers to the n-th attempt (from 1) of an event.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Answer {
    Status(u16),
    /// Never answers (the deliverer's timeout ends the attempt).
    Hang,
}

#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub(crate) id: String,
    pub(crate) timestamp: String,
    pub(crate) signature: String,
    pub(crate) body: String,
}

#[derive(Clone)]
pub(crate) struct Receiver {
    pub(crate) url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

type Script = Arc<dyn Fn(usize) -> Answer + Send + Sync>;

impl Receiver {
    pub(crate) async fn start(script: impl Fn(usize) -> Answer + Send + Sync + 'static) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let state = (received.clone(), Arc::new(script) as Script);
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, received }
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Attempts per `webhook-id`.
    pub(crate) fn attempts(&self) -> BTreeMap<String, usize> {
        let mut attempts = BTreeMap::new();
        for r in self.received() {
            *attempts.entry(r.id).or_default() += 1;
        }
        attempts
    }

    pub(crate) fn ticket_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .received()
            .iter()
            .map(|r| {
                serde_json::from_str::<Value>(&r.body).unwrap()["data"]["ticket_id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

async fn receive(
    State((received, script)): State<(Arc<Mutex<Vec<Received>>>, Script)>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let message = Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body: String::from_utf8(body.to_vec()).unwrap(),
    };
    let attempt = {
        let mut received = received.lock().unwrap();
        received.push(message.clone());
        received.iter().filter(|r| r.id == message.id).count()
    };
    match script(attempt) {
        Answer::Status(status) => StatusCode::from_u16(status).unwrap(),
        Answer::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::OK
        }
    }
}

/// Verifies every received message with the reference library; panics naming the failure.
pub(crate) fn verify_with_reference_library(secret: &str, received: &[Received]) {
    let Some(python) = testkit::moto::tool("python") else {
        return;
    };
    let messages: Vec<Value> = received
        .iter()
        .map(|r| {
            json!({"body": r.body, "headers": {
                "webhook-id": r.id, "webhook-timestamp": r.timestamp, "webhook-signature": r.signature}})
        })
        .collect();
    let script = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
secret, messages = json.load(sys.stdin)
wh = Webhook(secret)
for m in messages:
    wh.verify(m["body"], m["headers"])
print(len(messages))
"#;
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json!([secret, messages]).to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the reference verifier refused a delivery: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        received.len().to_string()
    );
}

/// Delivery made fast through configuration: millisecond backoff, short timeouts, and
/// loopback receivers allowed.
pub(crate) fn fast_delivery(config: &mut Config) {
    fast_policy(config);
    let delivery = &mut config.delivery;
    delivery.backoff_base = Duration::from_millis(10);
    delivery.backoff_max = Duration::from_millis(50);
    delivery.jitter_max = Duration::ZERO;
    delivery.timeout = Duration::from_millis(400);
    delivery.lease = Duration::from_secs(1);
    delivery.allowed_hosts = vec!["127.0.0.1".into()];
}

pub(crate) async fn subscribe(
    app: &TestApp,
    owner: Option<&str>,
    url: &str,
) -> subscription::Created {
    subscription::create(
        &app.pool,
        Some(owner.unwrap_or(Submitter::LOCAL.owner)),
        url,
        false,
        &app.config.delivery,
    )
    .await
    .unwrap()
    .created()
    .expect("under the limit")
}

pub(crate) async fn ingest(app: &TestApp, owner: Option<&str>, subject: &str) -> String {
    let ticket = NewTicket {
        subject: subject.into(),
        message: "The body of the ticket".into(),
    };
    let submitter = Submitter {
        owner: owner.unwrap_or(Submitter::LOCAL.owner),
        daily_quota: None,
        rate_per_minute: None,
        dedup_hold: app.config.limits.dedup_hold,
    };
    match ingest::create_ticket(&app.pool, &app.config.versions, &ticket, submitter)
        .await
        .unwrap()
    {
        ingest::Outcome::Created(created) => created.id.to_string(),
        other => panic!("expected a new ticket, got {other:?}"),
    }
}

impl TestApp {
    pub(crate) fn deliverer(&self) -> Deliverer {
        Deliverer::new(self.pool.clone(), self.config.clone()).unwrap()
    }

    /// A deliverer killed (its invocation dropped) while two deliveries are in flight, then
    /// the wait until their leases have expired: what a crashed Lambda leaves behind.
    pub(crate) async fn kill_a_deliverer_with_two_in_flight(&self) {
        let deliverer = self.deliverer();
        let killed = tokio::spawn(async move {
            deliverer
                .run_invocation(
                    Instant::now() + Duration::from_secs(30),
                    &CancellationToken::new(),
                )
                .await
        });
        self.wait_until(
            "SELECT count(*) FROM delivery WHERE status = 'processing'",
            |n| n == 2,
            "both deliveries in flight",
        )
        .await;
        killed.abort();
        assert!(killed.await.unwrap_err().is_cancelled());
        self.wait_until(
            "SELECT count(*) FROM delivery WHERE status = 'processing' AND locked_until < now()",
            |n| n == 2,
            "the leases never expired",
        )
        .await;
    }

    /// Deliverer invocations until nothing is pending or in flight, or panics after `limit`.
    pub(crate) async fn deliver_all(&self, limit: Duration) {
        let deliverer = self.deliverer();
        let until = Instant::now() + limit;
        while self
            .count("SELECT count(*) FROM delivery WHERE status IN ('pending', 'processing')")
            .await
            > 0
        {
            assert!(
                Instant::now() < until,
                "deliveries did not drain within {limit:?}"
            );
            let deadline = Instant::now() + Duration::from_secs(5);
            let report = deliverer
                .run_invocation(deadline, &CancellationToken::new())
                .await
                .unwrap();
            if report.claimed == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}
