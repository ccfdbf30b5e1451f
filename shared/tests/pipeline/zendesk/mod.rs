//! The Zendesk connector against a fake Zendesk account on loopback (`fake_provider::zendesk`,
//! which checks each request against Zendesk's reference) and real PostgreSQL:
//! - `inbound`: signed events become tickets once; unsigned, wrong or replayed ones are
//!   refused and change nothing; no secret, no route; a burst is accepted without loss.
//! - `writeback`: answers written back once, through a 429 and an agent's concurrent edit,
//!   with the taxonomy's groups (never over an agent's) and none under the built-in policy;
//!   an agent's priority survives the final answer, a provisional urgent over an empty
//!   priority is undone with `null`, a closed ticket's 422 abandons its delivery.
//! - `promotion`: a reprocess's results are written back only by `promote --write-back`, to
//!   open tickets only; promoting back with it restores them.
//! - `corrections`: a person's regroup or priority change is the desk's label of that field
//!   only, applied in event time order, kept when it comes before the write-back; our own
//!   updates, triggers' (`-1`), retries, unmapped and shared groups and erased tickets are not.
//! - `import`: the desk's solved history as a labelled set that trains, through a 429 and
//!   across runs.
//! - `rotation`: the signing secret and the token read from Secrets Manager (moto) and
//!   rotated under a warm app: re-read on a mismatch or a 401 at most once a minute, the
//!   replaced signing secret still accepted for the overlap.

mod corrections;
mod import;
mod inbound;
mod promotion;
mod rotation;
mod writeback;

use std::time::Duration;

use axum::{body::Body, http::Request};
use fake_provider::{
    zendesk::{self, FakeZendesk},
    FakeProvider,
};
use serde_json::Value;
use triage::{config::Config, secret::Secret};

use crate::helpers::{spawn_app_with, use_fake, webhooks::fast_delivery, Response, TestApp};

pub(crate) const SECRET: &str = "dGhpc19zZWNyZXRfaXNfZm9yX3Rlc3Rpbmdfb25seQ==";
pub(crate) const EMAIL: &str = "triage@acme.example";
pub(crate) const TOKEN: &str = "6wiIBWbGkBMo1mRDMuVwkw1EPsNkeUj95PIz2akv";
/// The connector's agent in the fake account.
pub(crate) const API_USER: i64 = 7001;
/// An agent of the desk.
pub(crate) const AGENT: i64 = 901;

/// The connector configured against `fake` (its URL, the agent's token, the signing secret).
pub(crate) fn use_zendesk(config: &mut Config, fake: Option<&FakeZendesk>) {
    fast_delivery(config);
    config.zendesk.webhook_secret = Some(Secret::from(SECRET).into());
    if let Some(fake) = fake {
        config.zendesk.url = Some(fake.url());
        config.zendesk.email = EMAIL.into();
        config.zendesk.api_token = Secret::from(TOKEN).into();
    }
}

pub(crate) async fn spawn(fake: Option<&FakeZendesk>) -> TestApp {
    spawn_app_with(|config| use_zendesk(config, fake)).await
}

/// [`spawn`] with `model` as the provider: a desk's own taxonomy needs a model (the offline
/// rules answer only the built-in policy) and a prompt that frames the ticket as data.
pub(crate) async fn spawn_with_model(fake: &FakeZendesk, model: &FakeProvider) -> TestApp {
    let url = model.url();
    spawn_app_with(|config| {
        use_fake(config, url);
        config.versions.prompt = "triage-v6".parse().unwrap();
        use_zendesk(config, Some(fake));
    })
    .await
}

pub(crate) async fn start_fake() -> FakeZendesk {
    FakeZendesk::start(EMAIL, TOKEN, API_USER).await
}

/// An RFC 3339 timestamp `ago` before now, as Zendesk sends it.
pub(crate) fn timestamp(ago: Duration) -> String {
    (chrono::Utc::now() - ago)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl TestApp {
    /// Posts `event` to the events route with the given signature headers.
    pub(crate) async fn post_event_with(
        &self,
        event: &Value,
        signature: Option<String>,
        timestamp: Option<String>,
    ) -> Response {
        let mut builder =
            Request::post("/connectors/zendesk/events").header("content-type", "application/json");
        if let Some(signature) = signature {
            builder = builder.header("x-zendesk-webhook-signature", signature);
        }
        if let Some(timestamp) = timestamp {
            builder = builder.header("x-zendesk-webhook-signature-timestamp", timestamp);
        }
        self.request(builder.body(Body::from(event.to_string())).unwrap())
            .await
    }

    /// Posts `event` signed as Zendesk signs it, now.
    pub(crate) async fn post_event(&self, event: &Value) -> Response {
        self.post_event_signed(event, SECRET).await
    }

    /// Posts `event` signed now with signing secret `secret`.
    pub(crate) async fn post_event_signed(&self, event: &Value, secret: &str) -> Response {
        let at = timestamp(Duration::ZERO);
        let signature = zendesk::sign(secret, &at, event.to_string().as_bytes());
        self.post_event_with(event, Some(signature), Some(at)).await
    }
}
