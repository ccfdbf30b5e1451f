use crate::helpers::spawn_app;

fn body(subject: &str) -> String {
    serde_json::json!({ "subject": subject, "message": "m" }).to_string()
}

#[tokio::test]
async fn retry_with_same_key_and_body_replays_the_original_response() {
    let app = spawn_app().await;
    let first = app.post_json(body("a"), Some("req-1")).await;
    let again = app.post_json(body("a"), Some("req-1")).await;
    assert_eq!(first.status, 201);
    assert_eq!(again.status, 201);
    assert_eq!(first.body, again.body);
    assert_eq!(first.headers["location"], again.headers["location"]);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 1);
}

#[tokio::test]
async fn same_key_with_a_different_body_is_422_and_changes_nothing() {
    let app = spawn_app().await;
    app.post_json(body("a"), Some("req-1")).await;
    let other = app.post_json(body("b"), Some("req-1")).await;
    assert_eq!(other.status, 422);
    assert_eq!(other.headers["content-type"], "application/problem+json");
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 1);
}

#[tokio::test]
async fn fifty_concurrent_posts_with_one_key_create_one_ticket() {
    let app = spawn_app().await;
    let posts = (0..50).map(|_| app.post_json(body("a"), Some("\"req-concurrent\"")));
    let responses = futures::future::join_all(posts).await;
    assert!(
        responses.iter().all(|r| r.status == 201),
        "{:?}",
        responses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(responses.iter().all(|r| r.body == responses[0].body));
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 1);
}

#[tokio::test]
async fn an_expired_key_creates_a_new_ticket() {
    let app = spawn_app().await;
    let first = app.post_json(body("a"), Some("req-1")).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE request_idempotency SET expires_at = now() - interval '1 second'",
            &[],
        )
        .await
        .unwrap();
    let second = app.post_json(body("b"), Some("req-1")).await;
    assert_eq!(second.status, 201);
    assert_ne!(first.body["id"], second.body["id"]);
}

#[tokio::test]
async fn an_empty_or_oversized_key_is_400() {
    let app = spawn_app().await;
    assert_eq!(app.post_json(body("a"), Some("")).await.status, 400);
    assert_eq!(
        app.post_json(body("a"), Some(&"k".repeat(256)))
            .await
            .status,
        400
    );
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 0);
}
