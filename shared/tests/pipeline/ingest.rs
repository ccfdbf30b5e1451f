use std::collections::HashSet;
use triage::secret::ExposeSecret;

use crate::helpers::{spawn_app, unreachable_config};

#[tokio::test]
async fn post_creates_ticket_and_outbox_row_and_get_shows_pending() {
    let app = spawn_app().await;
    let created = app.post_ticket("Printer on fire", "Floor 3.").await;
    assert_eq!(created.status, 201);
    let id = created.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        created.headers["location"],
        format!("/tickets/{id}").as_str()
    );

    let shown = app.get_ticket(&id).await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.body["subject"], "Printer on fire");
    assert_eq!(shown.body["message"], "Floor 3.");
    assert_eq!(shown.body["evaluation"]["status"], "pending");
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 1);
}

#[tokio::test]
async fn duplicate_post_creates_two_tickets_and_one_outbox_row() {
    let app = spawn_app().await;
    let a = app.post_ticket("Printer on fire", "Floor 3.").await;
    let b = app.post_ticket("  Printer on fire ", "\nFloor 3.\t").await;
    assert_eq!((a.status, b.status), (201, 201));
    assert_ne!(a.body["id"], b.body["id"]);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 2);
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 1);
}

#[tokio::test]
async fn every_duplicate_shows_the_evaluation_of_its_content() {
    let app = spawn_app().await;
    let a = app.post_ticket("Refund", "Charged twice").await;
    let b = app.post_ticket("Refund", "Charged twice").await;
    // Finish the one job by hand; the worker has its own tests.
    let client = app.pool.get().await.unwrap();
    client
        .batch_execute(
            "INSERT INTO evaluation_result (idempotency_key, ticket_id, is_urgent, department, urgency_score,
                                            model_version, prompt_version, policy_version)
             SELECT idempotency_key, ticket_id, 0.9, 'billing', 0.7, model_version, prompt_version, 'policy-v1'
             FROM evaluation_outbox;
             UPDATE evaluation_outbox SET status = 'done';",
        )
        .await
        .unwrap();
    for created in [a, b] {
        let shown = app.get_ticket(created.body["id"].as_str().unwrap()).await;
        let evaluation = &shown.body["evaluation"];
        assert_eq!(evaluation["status"], "done");
        assert_eq!(evaluation["department"], "billing");
        assert_eq!(evaluation["urgency_score"], 0.7);
        assert_eq!(evaluation["policy_version"], "policy-v1");
        assert_eq!(evaluation["prompt_version"], "triage-v3");
    }
}

#[tokio::test]
async fn fifty_concurrent_identical_posts_give_fifty_tickets_and_one_outbox_row() {
    let app = spawn_app().await;
    let posts = (0..50).map(|_| app.post_ticket("Same", "content"));
    let responses = futures::future::join_all(posts).await;
    assert!(responses.iter().all(|r| r.status == 201));
    let ids: HashSet<_> = responses.iter().map(|r| r.body["id"].to_string()).collect();
    assert_eq!(ids.len(), 50);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 50);
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM ticket_evaluation").await,
        50
    );
}

#[tokio::test]
async fn bad_input_gets_a_clear_problem_and_writes_nothing() {
    let app = spawn_app().await;
    let cases: Vec<(&str, String, u16)> = vec![
        ("application/json", "{not json".into(), 400),
        ("application/json", r#"{"subject":"a"}"#.into(), 422),
        (
            "application/json",
            r#"{"subject":"","message":"b"}"#.into(),
            422,
        ),
        (
            "application/json",
            r#"{"subject":"a","message":"b\u0000"}"#.into(),
            422,
        ),
        (
            "application/json",
            format!(r#"{{"subject":"a","message":"{}"}}"#, "x".repeat(20_001)),
            422,
        ),
        (
            "application/json",
            format!(r#"{{"subject":"a","message":"{}"}}"#, "x".repeat(70_000)),
            413,
        ),
        ("text/plain", r#"{"subject":"a","message":"b"}"#.into(), 415),
    ];
    for (content_type, body, expected) in cases {
        let request = axum::http::Request::post("/tickets")
            .header("content-type", content_type)
            .body(axum::body::Body::from(body))
            .unwrap();
        let response = app.request(request).await;
        assert_eq!(response.status, expected, "{:?}", response.body);
        assert_eq!(response.headers["content-type"], "application/problem+json");
        assert!(!response.body["detail"].as_str().unwrap().is_empty());
    }
    let invalid_utf8 = axum::http::Request::post("/tickets")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(
            &b"{\"subject\":\"\xc3\x28\",\"message\":\"b\"}"[..],
        ))
        .unwrap();
    assert_eq!(app.request(invalid_utf8).await.status, 400);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM evaluation_outbox").await, 0);
}

#[tokio::test]
async fn unknown_id_is_404_and_malformed_id_is_400() {
    let app = spawn_app().await;
    assert_eq!(
        app.get_ticket(&uuid::Uuid::new_v4().to_string())
            .await
            .status,
        404
    );
    let malformed = app.get_ticket("not-a-uuid").await;
    assert_eq!(malformed.status, 400);
    assert_eq!(
        malformed.headers["content-type"],
        "application/problem+json"
    );
    let wrong_method = app
        .request(
            axum::http::Request::delete("/tickets")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(wrong_method.status, 405);
}

#[tokio::test]
async fn database_outage_is_a_fast_503_problem() {
    let config = unreachable_config();
    let pool = triage::db::pool(&config.database).unwrap();
    let app = crate::helpers::TestApp {
        pool,
        config: std::sync::Arc::new(config),
    };
    let started = std::time::Instant::now();
    let response = app.post_ticket("a", "b").await;
    assert_eq!(response.status, 503);
    assert_eq!(response.headers["content-type"], "application/problem+json");
    assert!(response.headers.contains_key("retry-after"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "bounded by the connect timeout"
    );
}

#[tokio::test]
async fn a_connection_the_server_dropped_is_replaced_on_the_next_request() {
    // One pooled connection, so "the next request" is deterministic: a dead connection fails
    // at most the one request that meets it.
    let app = crate::helpers::spawn_app_with(|c| c.database.pool_size = 1).await;
    assert_eq!(app.post_ticket("before", "b").await.status, 201);
    // Terminate every pooled backend, as a failover or an idle timeout would: the app's own
    // sessions, not an autovacuum worker that may be visiting the fresh database (a master
    // login that is not a superuser may not terminate it, and it is no pooled connection).
    let (admin, conn) = tokio_postgres::connect(
        app.config.database.url.expose_secret(),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let terminated = admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND usename = current_user
               AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(terminated, 1, "the pool's one connection");
    // Termination is asynchronous: wait until the pooled backend is really gone.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
             AND usename = current_user AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        > 0
    {
        assert!(
            std::time::Instant::now() < until,
            "the backend never went away"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // The first request may meet the dead connection (a clean 503), never a hang or a 500;
    // from then on the pool has replaced it.
    let first = app.post_ticket("during", "b").await.status;
    assert!(first == 201 || first == 503, "{first}");
    assert_eq!(app.post_ticket("after", "b").await.status, 201);
}
