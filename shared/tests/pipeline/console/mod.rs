//! The operator console (`/admin`): over real HTTP from `http::serve`, as `triage serve` runs
//! it ([`pages`], its [`guards`]), and in headless Chromium through chromedriver ([`browser`],
//! the cascade's live precision: [`live`]).

mod browser;
mod guards;
mod live;
mod pages;

use std::time::Duration;

use fake_provider::{Behavior, FakeProvider};
use reqwest::{header, redirect, Client, StatusCode};
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

const TOKEN: &str = "console-test-token-0123456789abcdef";

fn client() -> Client {
    triage::tls::https_client_builder()
        .redirect(redirect::Policy::none())
        .build()
        .unwrap()
}

async fn get(url: &str) -> (StatusCode, String) {
    let response = client().get(url).send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

/// The CSRF form field of a page and the cookie it is tied to.
async fn form_tokens(url: &str, auth: Option<&str>) -> (String, String) {
    let mut request = client().get(url);
    if let Some(cookie) = auth {
        request = request.header(header::COOKIE, cookie);
    }
    let response = request.send().await.unwrap();
    let cookie = set_cookie(&response, "triage_csrf").expect("a new browser gets a CSRF cookie");
    let html = response.text().await.unwrap();
    let token = html
        .split(r#"name="csrf" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page has a CSRF field")
        .to_string();
    (cookie, token)
}

fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_string())
}

async fn dead_letters(app: &TestApp, reason: &str, n: usize) {
    app.ingest_many(
        &(0..n)
            .map(|i| (format!("s{i}"), format!("m{i}")))
            .collect::<Vec<_>>(),
    )
    .await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE evaluation_outbox SET status = 'dead', error_class = $1, finished_at = now(), last_error = 'refused'",
            &[&reason],
        )
        .await
        .unwrap();
}
