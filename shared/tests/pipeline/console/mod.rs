//! The operator console (`/admin`): over real HTTP from `http::serve`, as `triage serve` runs
//! it ([`pages`]), and in headless Chromium through chromedriver ([`browser`]).

mod browser;
mod pages;

use std::time::Duration;

use fake_provider::{Behavior, FakeProvider};
use serde_json::json;
use triage::operations::Operator;
use triage::{
    http::{self, admin::Guard},
    operations,
    secret::Secret,
};

use crate::helpers::{spawn_app_with_fake, TestApp};

const DRAIN: Duration = Duration::from_secs(60);

/// What a seeded run left behind, for the assertions.
pub struct Seeded {
    pub app: TestApp,
    /// Kept alive: the worker talked to it and the pages link its calls.
    pub _fake: FakeProvider,
    /// A ticket evaluated under both versions.
    pub ticket_id: String,
}

/// Every ticket's text carries a marker, so a test can prove lists never show ticket text.
pub const MARKER: &str = "confidential-text";

/// A run through the real worker and a fake provider: 6 contents evaluated under triage-v3
/// (plus 2 duplicate tickets, the dedup savings), all 6 reprocessed under triage-v4 where one
/// changes department, then 3 tickets the provider refuses (`content_policy`) and 2 it answers
/// with prose (`contract_violation`): done 12, dead 5, pending 0.
pub async fn seeded_run() -> Seeded {
    let fake = FakeProvider::start().await;
    let app = spawn_app_with_fake(&fake, |_| {}).await;
    let mut tickets: Vec<(String, String)> = (0..6)
        .map(|i| {
            (
                format!("Invoice {i} {MARKER}"),
                format!("Charged twice {i}, {MARKER}"),
            )
        })
        .collect();
    tickets.push(tickets[0].clone());
    tickets.push(tickets[1].clone());
    app.ingest_many(&tickets).await;
    app.drain(&app.worker(), DRAIN).await;

    fake.when_contains(
        "Invoice 3",
        Behavior::Answer(
            json!({"is_urgent": 0.9, "department": "technical", "urgency_score": 0.9}),
        ),
    );
    let reprocess =
        json!({"op": "reprocess", "since": "1h", "prompt_version": "triage-v4", "spread": "0s"});
    let request = serde_json::from_value(reprocess).unwrap();
    operations::run(&app.pool, &app.config, request, &Operator::os_user())
        .await
        .expect("reprocess runs");
    app.drain(&app.worker(), DRAIN).await;

    fake.when_contains("poison", Behavior::ContentPolicy);
    fake.when_contains("garbled", Behavior::NotJsonContent);
    let failing: Vec<(String, String)> = (0..3)
        .map(|i| {
            (
                format!("poison {i} {MARKER}"),
                format!("refused {i} {MARKER}"),
            )
        })
        .chain((0..2).map(|i| {
            (
                format!("garbled {i} {MARKER}"),
                format!("prose {i} {MARKER}"),
            )
        }))
        .collect();
    app.ingest_many(&failing).await;
    app.drain(&app.worker(), DRAIN).await;

    let ticket_id = app
        .row("SELECT id::text FROM ticket WHERE subject LIKE 'Invoice 3 %'")
        .await
        .get(0);
    Seeded {
        app,
        _fake: fake,
        ticket_id,
    }
}

/// Serves the API and the console on a loopback port, as `triage serve` does; the server
/// lives as long as the test's runtime. Returns its base URL.
pub async fn serve_console(app: &TestApp, token: Option<&str>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = http::LocalServer {
        api: Some(http::loopback::ApiGuard::new(None)),
        console: Some(Guard::new(token.map(Secret::from))),
    };
    tokio::spawn(http::serve(
        listener,
        app.state(),
        server,
        std::future::pending(),
    ));
    base
}

/// One console page as its HTML, from a console served for `app` (no token).
pub async fn console_page(app: &TestApp, path: &str) -> String {
    let base = serve_console(app, None).await;
    triage::tls::https_client_builder()
        .build()
        .unwrap()
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
