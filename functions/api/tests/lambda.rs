//! The api Lambda as Lambda runs it: the real binary, API Gateway HTTP API (payload 2.0)
//! events through the Runtime API emulator, a real PostgreSQL behind it.

use std::time::Duration;

use serde_json::Value;
use testkit::lambda::{events, Container};
use triage::{config::Config, db, telemetry::NAMESPACE};

const TIMEOUT: Duration = Duration::from_secs(30);

/// What API Gateway would turn the function's answer into.
struct HttpResponse {
    request_id: String,
    status: u64,
    headers: Value,
    body: Value,
}

async fn spawn(database_url: &str, extra: &[(&str, &str)]) -> Container {
    let env = [("DATABASE_URL", database_url)]
        .into_iter()
        .chain(extra.iter().copied());
    Container::start(env!("CARGO_BIN_EXE_triage-api"), env).await
}

/// The api's events, as API Gateway sends them.
trait Api {
    async fn request(&self, method: &str, path: &str, body: Option<&str>) -> HttpResponse;
    async fn send(&self, event: Value) -> HttpResponse;
}

impl Api for Container {
    async fn request(&self, method: &str, path: &str, body: Option<&str>) -> HttpResponse {
        self.send(events::http_api(method, path, body)).await
    }

    async fn send(&self, event: Value) -> HttpResponse {
        let invocation = self.runtime.invoke(event, TIMEOUT).await;
        // Every outcome, errors included, is an HTTP response: nothing reaches the runtime.
        let response = invocation.result.expect("the api answers with a response");
        HttpResponse {
            request_id: invocation.request_id,
            status: response["statusCode"].as_u64().expect("statusCode"),
            headers: response["headers"].clone(),
            body: serde_json::from_str(response["body"].as_str().unwrap_or("null"))
                .expect("a JSON body"),
        }
    }
}

async fn migrated_database() -> (String, deadpool_postgres::Pool) {
    let url = testkit::fresh_database().await;
    let config = Config::local(&url);
    db::migrate(&config.database).await.unwrap();
    (url, db::pool(&config.database).unwrap())
}

async fn count(pool: &deadpool_postgres::Pool, table: &str) -> i64 {
    let client = pool.get().await.unwrap();
    testkit::count(&client, &format!("SELECT count(*) FROM {table}")).await
}

#[tokio::test]
async fn post_ticket_event_gives_201_a_ticket_and_its_outbox_row_and_get_round_trips() {
    let (url, pool) = migrated_database().await;
    let container = spawn(&url, &[]).await;

    let created = container
        .request(
            "POST",
            "/tickets",
            Some(r#"{"subject":"Charged twice","message":"Refund please"}"#),
        )
        .await;

    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().expect("an id");
    assert_eq!(created.headers["location"], format!("/tickets/{id}"));
    assert_eq!(count(&pool, "ticket").await, 1);
    assert_eq!(count(&pool, "evaluation_outbox").await, 1);

    let shown = container
        .request("GET", &format!("/tickets/{id}"), None)
        .await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert_eq!(shown.body["id"], id);
    assert_eq!(shown.body["subject"], "Charged twice");
    assert_eq!(shown.body["message"], "Refund please");
    assert_eq!(shown.body["evaluation"]["status"], "pending");
    container
        .function
        .print_init_and_size(&container.runtime)
        .await;
}

#[tokio::test]
async fn malformed_body_gives_a_problem_and_no_row() {
    let (url, pool) = migrated_database().await;
    let container = spawn(&url, &[]).await;

    let rejected = container
        .request("POST", "/tickets", Some(r#"{"subject":"no message""#))
        .await;

    assert!(
        (400..500).contains(&rejected.status),
        "{} {}",
        rejected.status,
        rejected.body
    );
    assert_eq!(rejected.headers["content-type"], "application/problem+json");
    assert!(!rejected.body["detail"]
        .as_str()
        .unwrap_or_default()
        .is_empty());
    assert_eq!(count(&pool, "ticket").await, 0);
    assert_eq!(count(&pool, "evaluation_outbox").await, 0);
}

#[tokio::test]
async fn unreachable_database_gives_503_logged_with_the_request_id_and_no_ticket_text() {
    let container = spawn(
        // A local (plain TCP) server that is down.
        "postgres://triage@127.0.0.1:1/nowhere?sslmode=disable",
        &[("TRIAGE_DB_CONNECT_TIMEOUT_SECONDS", "0.5")],
    )
    .await;
    let (subject, message) = ("Zanzibar invoice", "Quokka account locked since Tuesday");
    let body = serde_json::json!({ "subject": subject, "message": message }).to_string();

    let response = container.request("POST", "/tickets", Some(&body)).await;

    assert_eq!(response.status, 503, "{}", response.body);
    assert_eq!(response.headers["content-type"], "application/problem+json");
    let function = &container.function;
    function.stderr().wait_for("database unavailable").await;
    function.assert_telemetry(&response.request_id, NAMESPACE, &[subject, message]);
}

#[tokio::test]
async fn idempotency_keys_are_scoped_by_the_iam_caller_api_gateway_names() {
    let (url, pool) = migrated_database().await;
    let container = spawn(&url, &[]).await;
    let keyed = |user: &str| {
        let mut event = events::http_api(
            "POST",
            "/tickets",
            Some(r#"{"subject":"Charged twice","message":"Refund please"}"#),
        );
        event["headers"]["idempotency-key"] = "order-42".into();
        event["requestContext"]["authorizer"] = serde_json::json!({"iam": {
            "accountId": "123456789012",
            "userArn": format!("arn:aws:iam::123456789012:user/{user}"),
        }});
        event
    };

    let alice = container.send(keyed("alice")).await;
    let bob = container.send(keyed("bob")).await;
    let alice_again = container.send(keyed("alice")).await;

    assert_eq!(
        (alice.status, bob.status, alice_again.status),
        (201, 201, 201)
    );
    assert_ne!(alice.body["id"], bob.body["id"]);
    assert_eq!(alice_again.body["id"], alice.body["id"]);
    assert_eq!(count(&pool, "ticket").await, 2);
    assert_eq!(count(&pool, "request_idempotency").await, 2);
}
