//! Test harness: every test gets a fresh database (migrated) on one real PostgreSQL server,
//! from `testkit` (which the Lambda-level tests of the functions share).

use std::sync::Arc;

use axum::{body::Body, http::Request};
use deadpool_postgres::Pool;
use http_body_util::BodyExt;
use tower::ServiceExt;
use triage::{
    config::Config,
    db,
    http::{router, AppState},
    secret::Secret,
};

pub use testkit::fresh_database;

pub mod budget;
pub mod gateway;
pub mod operations;
pub mod sql;
pub mod webhooks;

pub struct TestApp {
    pub pool: Pool,
    pub config: Arc<Config>,
}

/// A fresh database with migrations applied, and the configuration pointing at it.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_at(fresh_database().await, adjust).await
}

/// An app on the database at `url` (a server of the test's own), migrated.
pub async fn spawn_app_at(url: String, adjust: impl FnOnce(&mut Config)) -> TestApp {
    let mut config = Config::local(&url);
    config.database.pool_size = 16;
    // CI's two cores, with two tests training classifiers and creating databases beside this
    // one, have taken more than the default 3 s to accept a connection. No test here is about
    // that; those about timeouts set their own.
    config.database.connect_timeout = std::time::Duration::from_secs(10);
    // The suite's fixtures (reprocess and shadow diffs from v3 to v4, the versions page) are
    // written against triage-v3; the default (triage-v5) is config's own test.
    config.versions.prompt = "triage-v3".parse().unwrap();
    adjust(&mut config);
    db::migrate(&config.database)
        .await
        .expect("migrations apply");
    let pool = db::pool(&config.database).unwrap();
    TestApp {
        pool,
        config: Arc::new(config),
    }
}

pub struct Response {
    pub status: u16,
    pub headers: axum::http::HeaderMap,
    pub body: serde_json::Value,
}

impl TestApp {
    /// The same app and database, its processes configured with `policy_version` (a stored
    /// taxonomy's version, or a built-in policy): what they ingest is under it.
    pub fn under_policy(&self, policy_version: &str) -> TestApp {
        let mut config = Config::clone(&self.config);
        config.versions.policy = policy_version.parse().unwrap();
        TestApp {
            pool: self.pool.clone(),
            config: Arc::new(config),
        }
    }

    pub fn state(&self) -> AppState {
        AppState::new(self.pool.clone(), self.config.clone())
    }

    /// Sends a request through the router (the same one the Lambda and `triage serve` run).
    pub async fn request(&self, request: Request<Body>) -> Response {
        let response = router(self.state()).oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = if bytes.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        Response {
            status,
            headers,
            body,
        }
    }

    pub async fn post_ticket(&self, subject: &str, message: &str) -> Response {
        self.post_json(
            serde_json::json!({ "subject": subject, "message": message }).to_string(),
            None,
        )
        .await
    }

    pub async fn post_json(&self, body: String, idempotency_key: Option<&str>) -> Response {
        let mut builder = Request::post("/tickets").header("content-type", "application/json");
        if let Some(key) = idempotency_key {
            builder = builder.header("idempotency-key", key);
        }
        self.request(builder.body(Body::from(body)).unwrap()).await
    }

    pub async fn get_ticket(&self, id: &str) -> Response {
        self.request(
            Request::get(format!("/tickets/{id}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }
}

/// Each of `statements` is refused for lack of privilege on `client`'s login.
pub async fn assert_refused(client: &tokio_postgres::Client, statements: &[&str]) {
    for statement in statements {
        let refused = client.batch_execute(statement).await.unwrap_err();
        assert_eq!(
            refused.code(),
            Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
            "{statement}: {refused}"
        );
    }
}

/// A configuration whose database cannot be reached (nothing listens on port 1).
pub fn unreachable_config() -> Config {
    let mut config = Config::local("postgres://triage@127.0.0.1:1/nowhere");
    config.database.url = Secret::from("postgres://triage@127.0.0.1:1/nowhere");
    config.database.connect_timeout = std::time::Duration::from_millis(500);
    config
}

/// Worker policy made fast through configuration (backoff, jitter, cooldown in milliseconds),
/// never by skipping the behaviour.
pub fn fast_policy(config: &mut Config) {
    use std::time::Duration;
    let worker = &mut config.worker;
    worker.backoff_base = Duration::from_millis(10);
    worker.backoff_max = Duration::from_millis(200);
    worker.jitter_max = Duration::from_millis(10);
    worker.breaker_cooldown = Duration::from_millis(100);
    worker.call_timeout = Duration::from_secs(2);
    worker.lease = Duration::from_secs(10);
    worker.invocation_budget = Duration::from_secs(5);
    worker.batch_size = 10;
    worker.concurrency = 4;
    // A cascade's audit sends a random share of its local answers to the model: tests count
    // local answers exactly, so only the audit's own tests draw (`cascade::audit`).
    config.audit.share = 0.0;
}

/// An app whose worker talks to `fake` as an OpenAI-compatible provider over loopback.
pub async fn spawn_app_with_fake(
    fake: &fake_provider::FakeProvider,
    adjust: impl FnOnce(&mut Config),
) -> TestApp {
    let url = fake.url();
    spawn_app_with(move |config| {
        use_fake(config, url);
        adjust(config);
    })
    .await
}

/// The fast policy, and `fake` (at `url`) as an OpenAI-compatible provider.
pub fn use_fake(config: &mut Config, url: String) {
    fast_policy(config);
    config.provider.kind = triage::providers::ProviderKind::OpenAi;
    config.provider.url = url;
    config.provider.api_key = Secret::from("sk-test-secret").into();
    config.versions.model = "gpt-6-luna@medium".parse().unwrap();
}

impl TestApp {
    pub fn worker(&self) -> triage::pipeline::worker::Worker<triage::providers::AnyProvider> {
        self.worker_with(|_| {})
    }

    /// A worker of this app's configuration, adjusted (its invocations still last the app's
    /// `invocation_budget`: see [`TestApp::run_worker_once`]).
    pub fn worker_with(
        &self,
        adjust: impl FnOnce(&mut Config),
    ) -> triage::pipeline::worker::Worker<triage::providers::AnyProvider> {
        let mut config = Config::clone(&self.config);
        adjust(&mut config);
        let provider = triage::providers::AnyProvider::from_config(
            &config.provider,
            config.worker.call_timeout,
        )
        .expect("provider builds");
        triage::pipeline::worker::Worker::new(self.pool.clone(), provider, Arc::new(config))
            .expect("worker config is valid")
    }

    /// One worker invocation with the configured budget.
    pub async fn run_worker_once(
        &self,
        worker: &triage::pipeline::worker::Worker<triage::providers::AnyProvider>,
    ) -> triage::pipeline::worker::Report {
        let deadline = std::time::Instant::now() + self.config.worker.invocation_budget;
        worker
            .run_invocation(deadline, &tokio_util::sync::CancellationToken::new())
            .await
            .expect("invocation succeeds")
    }

    /// Runs invocations until no job is pending or processing (waiting out backoff and
    /// breaker pauses by polling the queue), or panics after `limit`.
    pub async fn drain(
        &self,
        worker: &triage::pipeline::worker::Worker<triage::providers::AnyProvider>,
        limit: std::time::Duration,
    ) {
        let until = std::time::Instant::now() + limit;
        while self
            .count(
                "SELECT count(*) FROM evaluation_outbox WHERE status IN ('pending', 'processing')",
            )
            .await
            > 0
        {
            assert!(
                std::time::Instant::now() < until,
                "queue did not drain within {limit:?}"
            );
            let report = self.run_worker_once(worker).await;
            if report.claimed == 0 {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }

    /// Inserts tickets through the ingest path, at most 50 at a time and never more than the
    /// pool has connections (a loaded machine would time the rest out waiting for one).
    pub async fn ingest_many(&self, tickets: &[(String, String)]) {
        let at_once = self.config.database.pool_size.clamp(1, 50);
        for chunk in tickets.chunks(at_once) {
            let inserts = chunk.iter().map(|(subject, message)| {
                let ticket = triage::pipeline::ingest::NewTicket {
                    subject: subject.clone(),
                    message: message.clone(),
                };
                async move {
                    triage::pipeline::ingest::create_ticket(
                        &self.pool,
                        &self.config.versions,
                        &ticket,
                        triage::pipeline::ingest::Submitter::LOCAL,
                    )
                    .await
                    .unwrap()
                }
            });
            futures::future::join_all(inserts).await;
        }
    }

    /// A new ticket about `subject`, its job claimed directly (as the worker's claim does),
    /// for tests that drive the ledger's and the budget's functions one step at a time.
    pub async fn claimed(&self, subject: &str) -> triage::pipeline::outbox::ClaimedJob {
        use triage::pipeline::outbox::claim::{self, Serves};
        assert_eq!(self.post_ticket(subject, "body").await.status, 201);
        let client = self.pool.get().await.unwrap();
        let serves = Serves::for_model_version(&self.config.versions.model);
        let lease = std::time::Duration::from_secs(60);
        let lanes = triage::pipeline::outbox::Lanes::default();
        claim::claim(&client, "w", 1, lease, serves, lanes)
            .await
            .unwrap()
            .pop()
            .expect("a job")
    }
}
