//! The subscription routes over real HTTP answer what openapi.yaml documents, and accept
//! the URLs of its pattern.

use serde_json::{json, Value};

use crate::helpers::spawn_app_with;

/// openapi.yaml, the contract scripts/api-contract runs schemathesis with.
fn openapi() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.yaml")).unwrap()
}

/// The statuses openapi.yaml documents for the operation `operation_id` (the keys of its
/// `responses:` block; the file's own layout, two spaces a level).
fn documented_statuses(spec: &str, operation_id: &str) -> Vec<u16> {
    let from = spec
        .find(&format!("operationId: {operation_id}\n"))
        .unwrap_or_else(|| panic!("openapi.yaml has no operation {operation_id}"));
    let mut lines = spec[from..]
        .lines()
        .skip_while(|l| *l != "      responses:");
    assert!(lines.next().is_some(), "{operation_id} has no responses");
    lines
        .take_while(|l| l.is_empty() || l.starts_with("        "))
        .filter_map(|l| l.strip_prefix("        \"")?.get(..3)?.parse().ok())
        .collect()
}

/// `NewSubscription.url`'s pattern.
fn url_pattern(spec: &str) -> String {
    let schema = &spec[spec.find("    NewSubscription:\n").unwrap()..];
    let line = schema
        .lines()
        .find_map(|l| l.trim().strip_prefix("pattern: '"))
        .expect("NewSubscription.url has a pattern");
    line.strip_suffix('\'').unwrap().to_string()
}

/// Issue 32, item 13 (schemathesis over openapi.yaml): `POST /subscriptions/{id}/rotate`
/// answered an undocumented 400 for an id that is not a UUID; a `url` the spec allowed (any
/// string) was refused, and one a URL parser takes but the spec's form does not (`https://A*`)
/// was accepted. Over real HTTP against `triage serve`'s router: each answer is a documented
/// status of its operation, errors are problem+json, every URL of the spec's pattern is
/// accepted and the parser's extras are refused.
#[tokio::test]
async fn the_subscription_routes_answer_what_openapi_yaml_documents_and_accept_its_urls() {
    let app = spawn_app_with(|config| config.delivery.subscriptions_per_caller = 1000).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = triage::http::LocalServer {
        api: Some(triage::http::loopback::ApiGuard::new(None)),
        console: None,
    };
    tokio::spawn(triage::http::serve(
        listener,
        app.state(),
        server,
        std::future::pending(),
    ));
    let spec = openapi();
    let client = triage::tls::https_client_builder().build().unwrap();
    // Sends, checks the status is `expected` and documented for `operation`, and (for an
    // error) a problem+json body saying the same status; the body.
    let call = |operation: &'static str, request: reqwest::RequestBuilder, expected: u16| {
        let documented = documented_statuses(&spec, operation);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            assert_eq!(status, expected, "{operation}: {body}");
            assert!(
                documented.contains(&status),
                "{operation} answered {status}, openapi.yaml documents {documented:?}"
            );
            if status >= 400 {
                assert_eq!(content_type, "application/problem+json", "{operation}");
                assert_eq!(body["status"], status, "{body}");
                assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()));
            }
            body
        }
    };
    let create = |url: &str| {
        client
            .post(format!("{base}/subscriptions"))
            .header("content-type", "application/json")
            .body(json!({ "url": url }).to_string())
    };

    // An id that is not a UUID: the documented 400, for rotation as for deletion.
    for (operation, request) in [
        (
            "rotateSubscriptionSecret",
            client.post(format!("{base}/subscriptions/not-a-uuid/rotate")),
        ),
        (
            "deleteSubscription",
            client.delete(format!("{base}/subscriptions/null,null")),
        ),
    ] {
        let problem = call(operation, request, 400).await;
        assert!(
            problem["detail"].as_str().unwrap().contains("UUID"),
            "{problem}"
        );
    }
    let unknown = uuid::Uuid::new_v4();
    let rotate = |id: &str| client.post(format!("{base}/subscriptions/{id}/rotate"));
    call(
        "rotateSubscriptionSecret",
        rotate(&unknown.to_string()),
        404,
    )
    .await;

    // Outside the spec's form, refused: what the schema used to allow, and what a URL parser
    // takes (a `*` in the host, a fragment, an upper-case scheme, an octal-looking address).
    for url in [
        "0".repeat(2048).as_str(),
        "https://A*",
        "https://hooks.example.com/triage#fragment",
        "HTTPS://hooks.example.com/triage",
        "https://08.8.8.8/hook",
        "https://hooks.example.com/with space",
    ] {
        call("createSubscription", create(url), 400).await;
    }
    // Over the body limit: a documented 413 too.
    let huge = format!("https://hooks.example.com/{}", "a".repeat(70_000));
    call("createSubscription", create(&huge), 413).await;
    assert_eq!(app.count("SELECT count(*) FROM subscription").await, 0);

    // Every URL the spec's own pattern generates (a fixed seed) is accepted; and a created
    // subscription rotates and deletes with documented answers.
    let pattern = url_pattern(&spec);
    let anchored = pattern
        .strip_prefix('^')
        .unwrap()
        .strip_suffix('$')
        .unwrap();
    let strategy = proptest::string::string_regex(anchored).unwrap();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut accepted = 0;
    while accepted < 40 {
        use proptest::strategy::{Strategy, ValueTree};
        let url = strategy.new_tree(&mut runner).unwrap().current();
        if url.chars().count() > 2048 {
            continue; // the schema's maxLength
        }
        let created = call("createSubscription", create(&url), 201).await;
        assert!(created["secret"].as_str().unwrap().starts_with("whsec_"));
        accepted += 1;
    }
    for url in [
        "https://helpdesk.example.com/hooks/triage",
        "https://A-1.b2-C.Example:65535/p;x=1/%2F?q=/s?t&u=%41",
    ] {
        let created = call("createSubscription", create(url), 201).await;
        let id = created["id"].as_str().unwrap().to_string();
        call("rotateSubscriptionSecret", rotate(&id), 200).await;
        let delete = client.delete(format!("{base}/subscriptions/{id}"));
        call("deleteSubscription", delete, 204).await;
    }
    assert_eq!(app.count("SELECT count(*) FROM subscription").await, 40);
}
