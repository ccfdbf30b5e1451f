//! Issue 17's guards, each driven the way an attacker or an accident would reach it: the local
//! server's exposure, who reads a ticket, the per-caller quota (docs/runbook.md "Security").

use axum::body::Body;
use http_body_util::BodyExt;
use reqwest::{header, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;
use triage::{
    http::{self, admin::Guard, loopback::ApiGuard, router, LocalServer, READ_ALL_SCOPE},
    secret::Secret,
};

use crate::helpers::{gateway::scoped_jwt, spawn_app, spawn_app_at, spawn_app_with, TestApp};

const TOKEN: &str = "api-token-0123456789abcdef";

pub(crate) fn iam(user: &str) -> Value {
    json!({"iam": {"accountId": "123456789012",
                   "userArn": format!("arn:aws:iam::123456789012:user/{user}")}})
}

/// A request through API Gateway (payload v2) from the caller `authorizer` describes.
pub(crate) async fn send_as(
    app: &TestApp,
    authorizer: &Value,
    method: &str,
    path: &str,
    body: Option<&str>,
    key: Option<&str>,
) -> (u16, header::HeaderMap, Value) {
    let mut event = testkit::lambda::events::http_api(method, path, body);
    event["requestContext"]["authorizer"] = authorizer.clone();
    if let Some(key) = key {
        event["headers"]["idempotency-key"] = key.into();
    }
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let (parts, body) = request.into_parts();
    let request = axum::http::Request::from_parts(parts, Body::from(body.to_vec()));
    let response = router(app.state()).oneshot(request).await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, headers, body)
}

pub(crate) async fn post_as(
    app: &TestApp,
    who: &Value,
    message: &str,
) -> (u16, header::HeaderMap, Value) {
    let body = json!({"subject": "Refund", "message": message}).to_string();
    send_as(app, who, "POST", "/tickets", Some(&body), None).await
}

pub(crate) async fn get_as(app: &TestApp, who: &Value, id: &str) -> (u16, Value) {
    let (status, _, body) = send_as(app, who, "GET", &format!("/tickets/{id}"), None, None).await;
    (status, body)
}

/// Serves `server` on `address` as `triage serve` does; its base URL (always via 127.0.0.1).
async fn serve(app: &TestApp, address: &str, server: LocalServer) -> String {
    let listener = tokio::net::TcpListener::bind(address).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(http::serve(
        listener,
        app.state(),
        server,
        std::future::pending(),
    ));
    format!("http://127.0.0.1:{port}")
}

fn client() -> reqwest::Client {
    triage::tls::https_client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

const TICKET: &str = r#"{"subject":"Refund","message":"charged twice"}"#;

#[tokio::test]
async fn on_loopback_every_route_refuses_a_request_addressed_to_another_host() {
    let app = spawn_app().await;
    let server = LocalServer {
        api: Some(ApiGuard::new(None)),
        console: Some(Guard::new(None)),
    };
    let base = serve(&app, "127.0.0.1:0", server).await;
    let created = client()
        .post(format!("{base}/tickets"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(TICKET)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    // A page on attacker.example whose name now resolves to 127.0.0.1 (DNS rebinding).
    let rebound = |request: reqwest::RequestBuilder| {
        request
            .header(header::HOST, "attacker.example:3000")
            .header(header::CONTENT_TYPE, "application/json")
    };
    let read = rebound(client().get(format!("{base}/tickets/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::FORBIDDEN);
    let text = read.text().await.unwrap();
    assert!(!text.contains("charged twice"), "{text}");
    let write = rebound(client().post(format!("{base}/tickets")))
        .body(TICKET)
        .send()
        .await
        .unwrap();
    assert_eq!(write.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 1);
    let console = rebound(client().get(format!("{base}/admin")))
        .send()
        .await
        .unwrap();
    assert_eq!(console.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn beyond_loopback_the_api_answers_only_with_its_bearer_token() {
    let app = spawn_app().await;
    let server = LocalServer {
        api: Some(ApiGuard::new(Some(Secret::from(TOKEN)))),
        console: None,
    };
    // Any address: the Host check is loopback's; beyond it, the token is the guard.
    let base = serve(&app, "0.0.0.0:0", server).await;
    let post = |auth: Option<&str>| {
        let mut request = client()
            .post(format!("{base}/tickets"))
            .header(header::HOST, "10.0.1.25:8080")
            .header(header::CONTENT_TYPE, "application/json")
            .body(TICKET);
        if let Some(auth) = auth {
            request = request.header(header::AUTHORIZATION, auth);
        }
        request.send()
    };
    for refused in [
        None,
        Some("Bearer wrong-token-0123456789abcdef"),
        Some(TOKEN),
    ] {
        let response = post(refused).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{refused:?}");
        assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM ticket").await, 0);
    let created = post(Some(&format!("Bearer {TOKEN}"))).await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    // The console was not asked for: not served at all.
    let console = client()
        .get(format!("{base}/admin"))
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(console.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_local_idempotency_key_never_equals_a_principals_stored_form() {
    let app = spawn_app().await;
    let alice = iam("alice");
    let body = r#"{"subject":"Refund","message":"alice's text"}"#;
    let (status, _, first) =
        send_as(&app, &alice, "POST", "/tickets", Some(body), Some("k1")).await;
    assert_eq!(status, 201);
    let stored: String = app.row("SELECT key FROM request_idempotency").await.get(0);
    // The local caller sends alice's stored form as its own key, with alice's body.
    let local = app.post_json(body.into(), Some(&stored)).await;
    assert_eq!(local.status, 201, "{:?}", local.body);
    assert_ne!(local.body["id"], first["id"], "not alice's ticket replayed");
    assert_eq!(
        app.count("SELECT count(*) FROM request_idempotency").await,
        2
    );
}

#[tokio::test]
async fn another_callers_ticket_is_a_404_and_only_the_read_all_scope_reads_every_ticket() {
    let app = spawn_app().await;
    let (alice, bob) = (iam("alice"), iam("bob"));
    let (_, _, created) = post_as(&app, &alice, "alice's text").await;
    let id = created["id"].as_str().unwrap();

    let (status, own) = get_as(&app, &alice, id).await;
    assert_eq!(
        (status, own["message"].as_str()),
        (200, Some("alice's text"))
    );
    // Bob's answer is the one for an id that does not exist: existence is not revealed.
    let (status, other) = get_as(&app, &bob, id).await;
    let missing = uuid::Uuid::new_v4().to_string();
    let (_, unknown) = get_as(&app, &bob, &missing).await;
    assert_eq!(status, 404);
    assert_eq!(
        other["detail"].as_str().unwrap().replace(id, "ID"),
        unknown["detail"].as_str().unwrap().replace(&missing, "ID")
    );
    assert!(!other.to_string().contains("alice's text"));

    let reader = scoped_jwt("svc-reader", "triage/tickets.read");
    assert_eq!(get_as(&app, &reader, id).await.0, 404);
    let support = scoped_jwt(
        "svc-support",
        &format!("triage/tickets.read {READ_ALL_SCOPE}"),
    );
    let (status, seen) = get_as(&app, &support, id).await;
    assert_eq!(
        (status, seen["message"].as_str()),
        (200, Some("alice's text"))
    );
    // The local caller (triage serve) owns only what it created.
    assert_eq!(app.get_ticket(id).await.status, 404);
}

#[tokio::test]
async fn past_its_daily_quota_a_caller_gets_a_429_with_retry_after_on_every_instance() {
    let url = testkit::fresh_database().await;
    let quota = |config: &mut triage::config::Config| config.limits.caller_daily_tickets = Some(2);
    // Two API instances (two pools) on one database: the count is PostgreSQL's.
    let one = spawn_app_at(url.clone(), quota).await;
    let two = spawn_app_at(url, quota).await;
    let (alice, bob) = (iam("alice"), iam("bob"));
    assert_eq!(post_as(&one, &alice, "first").await.0, 201);
    let keyed = r#"{"subject":"Refund","message":"second"}"#;
    let (status, _, kept) =
        send_as(&two, &alice, "POST", "/tickets", Some(keyed), Some("k2")).await;
    assert_eq!(status, 201);

    let (status, headers, problem) = post_as(&one, &alice, "third").await;
    assert_eq!(status, 429, "{problem}");
    assert_eq!(headers[header::CONTENT_TYPE], "application/problem+json");
    let retry: u64 = headers[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry), "{retry}");
    let (status, _, _) = send_as(&two, &alice, "POST", "/tickets", Some(TICKET), Some("k3")).await;
    assert_eq!(status, 429);
    assert_eq!(
        one.count("SELECT count(*) FROM ticket").await,
        2,
        "nothing written"
    );
    assert_eq!(
        one.count("SELECT count(*) FROM request_idempotency").await,
        1
    );
    // A replay is not a new ticket: still answered; another caller has its own quota.
    let (status, _, replay) =
        send_as(&one, &alice, "POST", "/tickets", Some(keyed), Some("k2")).await;
    assert_eq!((status, &replay["id"]), (201, &kept["id"]));
    assert_eq!(post_as(&two, &bob, "bob's").await.0, 201);
}

#[tokio::test]
async fn without_a_quota_nothing_is_counted() {
    let app = spawn_app_with(|_| {}).await;
    assert_eq!(app.post_ticket("a", "b").await.status, 201);
    assert_eq!(
        app.count("SELECT count(*) FROM caller_daily_tickets").await,
        0
    );
}

#[test]
fn the_deployed_default_prompt_is_triage_v5_which_keeps_ticket_text_out_of_the_instructions() {
    let read = |path: &str| {
        std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    let template = read("template.yaml");
    let parameter = template
        .split("\n  PromptVersion:\n")
        .nth(1)
        .expect("the PromptVersion parameter");
    let default = parameter.lines().find(|l| l.trim().starts_with("Default:"));
    assert!(
        default.is_some_and(|l| l.contains("Default: triage-v5")),
        "{default:?}"
    );
    let samconfig = read("samconfig.toml");
    let set: Vec<&str> = samconfig
        .lines()
        .filter(|l| l.contains("\"PromptVersion="))
        .collect();
    assert!(!set.is_empty());
    assert!(
        set.iter().all(|l| l.contains("PromptVersion=triage-v5")),
        "{set:?}"
    );
    let config = triage::config::Config::from_lookup(|_| None).unwrap();
    assert_eq!(config.versions.prompt, "triage-v5");
}

fn template() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap()
}

/// The template's ApiFunction resource.
fn api_function(template: &str) -> &str {
    template
        .split("\n  ApiFunction:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n  ApiLogGroup:").next())
        .expect("the ApiFunction resource")
}

#[test]
fn the_api_function_has_reserved_concurrency_so_it_cannot_exhaust_the_databases_connections() {
    let template = template();
    let api = api_function(&template);
    assert!(
        api.contains("ReservedConcurrentExecutions: !Ref ApiReservedConcurrency"),
        "{api}"
    );
    assert!(
        api.contains("TRIAGE_DB_POOL_SIZE: \"1\""),
        "one connection each"
    );
}

#[test]
fn the_deployed_api_gets_the_per_caller_quota_from_its_parameter() {
    let template = template();
    let api = api_function(&template);
    assert!(
        api.contains(
            "TRIAGE_CALLER_DAILY_TICKETS: !If [HasCallerDailyTickets, !Ref CallerDailyTickets, !Ref AWS::NoValue]"
        ),
        "{api}"
    );
    let parameter = template
        .split("\n  CallerDailyTickets:\n")
        .nth(1)
        .expect("the CallerDailyTickets parameter");
    assert!(
        parameter.contains("AllowedPattern: ^$|^[1-9][0-9]*$"),
        "{parameter}"
    );
    assert!(
        template.contains("HasCallerDailyTickets: !Not [!Equals [!Ref CallerDailyTickets, \"\"]]")
    );
    // What the function reads from it is the quota ingest enforces.
    let config = triage::config::Config::from_lookup(|name| {
        (name == "TRIAGE_CALLER_DAILY_TICKETS").then(|| "500".to_string())
    })
    .unwrap();
    assert_eq!(config.limits.caller_daily_tickets, Some(500));
}

#[tokio::test]
async fn the_sweeper_forgets_quota_counts_of_past_days() {
    let app = spawn_app_with(|config| config.limits.caller_daily_tickets = Some(5)).await;
    assert_eq!(app.post_ticket("a", "b").await.status, 201);
    app.exec(
        "INSERT INTO caller_daily_tickets (owner, day, tickets)
         VALUES ('old', (now() AT TIME ZONE 'UTC')::date - 2, 7)",
    )
    .await;
    triage::pipeline::sweep::sweep(&app.pool, &app.config)
        .await
        .unwrap();
    let left: String = app
        .row("SELECT string_agg(owner, ',') FROM caller_daily_tickets")
        .await
        .get(0);
    assert_eq!(left, "local", "today's count stays, the old day goes");
}

#[tokio::test]
async fn subscriptions_need_their_own_scope_in_jwt_mode_whatever_else_the_token_may_do() {
    let app = spawn_app_with(|c| c.delivery.allowed_hosts = vec!["127.0.0.1".into()]).await;
    let body = json!({"url": "http://127.0.0.1:9/hook", "include_text": true}).to_string();
    let create = |who: Value| {
        let (app, body) = (&app, body.clone());
        async move { send_as(app, &who, "POST", "/subscriptions", Some(&body), None).await }
    };
    // A token for the audience that may write tickets, or none at all: no webhook, which would
    // read the caller's ticket text without tickets.read.
    for scope in [
        "",
        "triage/tickets.write triage/tickets.read",
        http::SUBSCRIPTIONS_READ_SCOPE,
    ] {
        let (status, _, problem) = create(scoped_jwt("alice", scope)).await;
        assert_eq!(status, 403, "{scope}: {problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains(http::SUBSCRIPTIONS_WRITE_SCOPE),
            "{problem}"
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM subscription").await, 0);

    let (status, _, created) = create(scoped_jwt("alice", http::SUBSCRIPTIONS_WRITE_SCOPE)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let reader = scoped_jwt("alice", http::SUBSCRIPTIONS_READ_SCOPE);
    let (status, _, listed) = send_as(&app, &reader, "GET", "/subscriptions", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["subscriptions"].as_array().unwrap().len(), 1);
    let tickets_only = scoped_jwt("alice", "triage/tickets.write triage/tickets.read");
    for (method, path) in [
        ("GET", "/subscriptions".to_string()),
        ("DELETE", format!("/subscriptions/{id}")),
        ("POST", format!("/subscriptions/{id}/rotate")),
    ] {
        let (status, _, _) = send_as(&app, &tickets_only, method, &path, None, None).await;
        assert_eq!(status, 403, "{method} {path}");
    }
    for (method, path) in [
        ("DELETE", format!("/subscriptions/{id}")),
        ("POST", format!("/subscriptions/{id}/rotate")),
    ] {
        let (status, _, _) = send_as(&app, &reader, method, &path, None, None).await;
        assert_eq!(status, 403, "a reader: {method} {path}");
    }
    assert_eq!(app.count("SELECT count(*) FROM subscription").await, 1);
    // IAM callers are authorized by their policy on the route, as for tickets.
    let (status, _, _) = create(iam("alice")).await;
    assert_eq!(status, 201);
}

#[test]
fn in_jwt_mode_the_template_gives_each_subscription_route_its_scope() {
    let template = template();
    let route = |key: &str| {
        let start = template.find(&format!("RouteKey: {key}\n")).expect(key);
        template[start..]
            .lines()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let write =
        "AuthorizationScopes: !If [UseJwt, [triage/subscriptions.write], !Ref AWS::NoValue]";
    for key in [
        "POST /subscriptions",
        "DELETE /subscriptions/{id}",
        "POST /subscriptions/{id}/rotate",
    ] {
        assert!(route(key).contains(write), "{key}: {}", route(key));
    }
    assert!(route("GET /subscriptions").contains(
        "AuthorizationScopes: !If [UseJwt, [triage/subscriptions.read, triage/subscriptions.write], !Ref AWS::NoValue]"
    ));
}
