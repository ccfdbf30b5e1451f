//! The console over real HTTP: what each page shows, what it never shows, and its guards.

use axum::{body::Body, http::Request};
use reqwest::{header, redirect, Client, StatusCode};

use super::{seeded_run, serve_console, MARKER};
use crate::helpers::{spawn_app, TestApp};

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

#[tokio::test]
async fn the_lambda_router_answers_404_for_the_console() {
    let app = spawn_app().await;
    for path in ["/admin", "/admin/dead-letters", "/admin/login"] {
        let response = app
            .request(Request::get(path).body(Body::empty()).unwrap())
            .await;
        assert_eq!(response.status, 404, "{path}");
    }
}

#[tokio::test]
async fn lists_show_counts_reasons_and_versions_but_never_ticket_text() {
    let seeded = seeded_run().await;
    let base = serve_console(&seeded.app, None).await;

    let (status, overview) = get(&format!("{base}/admin")).await;
    assert_eq!(status, 200);
    // The 2 duplicate tickets saved a call under each of the 2 versions.
    let stats = [
        ("pending", "0"),
        ("processing", "0"),
        ("done", "12"),
        ("dead", "5"),
        ("duplicates", "4"),
    ];
    for (stat, value) in stats {
        shows(&overview, &format!("data-stat=\"{stat}\""), value);
    }
    assert!(overview.contains("<svg"), "charts are inline SVG");
    // 12 results; 17 calls: 12 answered, 3 refused by policy, 2 answered with prose.
    for caption in [
        "Evaluations per hour — total 12,",
        "Provider calls per hour — total 17,",
    ] {
        assert!(overview.contains(caption), "{caption}: {overview}");
    }
    assert!(
        !overview.contains("data-held="),
        "no limit configured and no 429: the calls took no slot in the shared limit: {overview}"
    );

    let (_, dead) = get(&format!("{base}/admin/dead-letters")).await;
    shows(&dead, r#"data-dead-count="content_policy""#, "3");
    shows(&dead, r#"data-dead-count="contract_violation""#, "2");

    let (_, versions) = get(&format!(
        "{base}/admin/versions?from=triage-v3&to=triage-v4"
    ))
    .await;
    shows(&versions, r#"data-stat="compared""#, "8");
    shows(&versions, r#"data-stat="agreement""#, "87.5%");

    for page in [&overview, &dead, &versions] {
        assert!(
            !page.contains(MARKER),
            "ticket text leaked into a list: {page}"
        );
    }
}

/// The element with `attribute` says `value`.
fn shows(page: &str, attribute: &str, value: &str) {
    assert!(
        page.contains(&format!("{attribute}>{value}<")),
        "{attribute} = {value}: {page}"
    );
}

#[tokio::test]
async fn the_ticket_page_shows_its_text_evaluation_and_attempt_ledger() {
    let seeded = seeded_run().await;
    let base = serve_console(&seeded.app, None).await;
    let (status, page) = get(&format!("{base}/admin/tickets/{}", seeded.ticket_id)).await;
    assert_eq!(status, 200);
    assert!(
        page.contains("Invoice 3") && page.contains(MARKER),
        "{page}"
    );
    assert!(page.contains(r#"data-stat="status">done<"#), "{page}");
    assert_eq!(
        page.matches(r#"data-call-outcome="ok""#).count(),
        2,
        "one call per version: {page}"
    );
    assert!(page.contains("triage-v4"));
}

#[tokio::test]
async fn a_redrive_post_from_another_site_or_without_its_csrf_token_changes_nothing() {
    let app = spawn_app().await;
    dead_letters(&app, "content_policy", 3).await;
    let base = serve_console(&app, None).await;
    let confirm = format!("{base}/admin/dead-letters/redrive?reason=content_policy");
    let (status, page) = get(&confirm).await;
    assert_eq!(status, 200);
    assert!(
        page.contains(r#"data-would-move="3""#),
        "the dry run counts: {page}"
    );
    let (cookie, token) = form_tokens(&confirm, None).await;
    assert!(page.contains(r#"name="count" value="3""#), "{page}");
    let post = |cookie: Option<String>, token: &str, site: &str| {
        let mut request = client()
            .post(format!("{base}/admin/dead-letters/redrive"))
            .header("sec-fetch-site", site)
            .form(&[
                ("csrf", token),
                ("reason", "content_policy"),
                ("spread", "0s"),
                ("count", "3"),
            ]);
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        request.send()
    };

    let refused = [
        post(Some(cookie.clone()), &token, "cross-site")
            .await
            .unwrap(),
        post(None, &token, "same-origin").await.unwrap(),
        post(Some(cookie.clone()), &"0".repeat(64), "same-origin")
            .await
            .unwrap(),
    ];
    for response in refused {
        assert_eq!(response.status(), 403);
    }
    let evil_origin = client()
        .post(format!("{base}/admin/dead-letters/redrive"))
        .header(header::COOKIE, &cookie)
        .header(header::ORIGIN, "http://attacker.example")
        .form(&[("csrf", token.as_str()), ("reason", "content_policy")])
        .send()
        .await
        .unwrap();
    assert_eq!(evil_origin.status(), 403);
    assert_eq!(app.status_counts().await.get("dead"), Some(&3));

    // Two more die after the operator saw the count: the confirmed three move, they stay.
    app.ingest_many(&[("late 0".into(), "m".into()), ("late 1".into(), "m".into())])
        .await;
    app.exec(
        "UPDATE evaluation_outbox SET status = 'dead', error_class = 'content_policy',
         finished_at = now(), last_error = 'refused' WHERE status = 'pending'",
    )
    .await;
    let done = post(Some(cookie), &token, "same-origin").await.unwrap();
    assert_eq!(done.status(), 200);
    assert!(done.text().await.unwrap().contains(r#"data-moved="3""#));
    assert_eq!(app.status_counts().await.get("pending"), Some(&3));
    assert_eq!(app.status_counts().await.get("dead"), Some(&2));
    // Audited like `triage redrive`, as the console's operator; the forged posts left no row.
    let audited = "SELECT count(*) FROM operation_audit WHERE op = 'redrive' AND NOT (parameters->>'dry_run')::bool AND principal LIKE 'console, os-user %'";
    assert_eq!(app.count(audited).await, 1);
}

#[tokio::test]
async fn without_a_token_a_request_addressed_to_another_host_name_is_refused() {
    let app = spawn_app().await;
    let base = serve_console(&app, None).await;
    let rebound = client()
        .get(format!("{base}/admin"))
        .header(header::HOST, "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    assert!(rebound
        .text()
        .await
        .unwrap()
        .contains("127.0.0.1 or localhost only"));
    assert_eq!(get(&format!("{base}/admin")).await.0, 200);
}

#[tokio::test]
async fn with_a_token_the_console_needs_sign_in_and_refuses_a_wrong_token() {
    let app = spawn_app().await;
    let base = serve_console(&app, Some(TOKEN)).await;
    let admin = format!("{base}/admin");
    let anonymous = client().get(&admin).send().await.unwrap();
    assert_eq!(anonymous.status(), 303);
    assert_eq!(anonymous.headers()[header::LOCATION], "/admin/login");
    let bearer = |token: &str| client().get(&admin).bearer_auth(token).send();
    assert_eq!(bearer("wrong").await.unwrap().status(), 303);
    assert_eq!(bearer(TOKEN).await.unwrap().status(), 200);
    let unsigned_post = client()
        .post(format!("{base}/admin/dead-letters/redrive"))
        .form(&[("csrf", "x"), ("reason", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned_post.status(), 401);

    let (csrf_cookie, csrf) = form_tokens(&format!("{base}/admin/login"), None).await;
    let login = |token: &'static str| {
        client()
            .post(format!("{base}/admin/login"))
            .header(header::COOKIE, &csrf_cookie)
            .form(&[("csrf", csrf.as_str()), ("token", token)])
            .send()
    };
    assert_eq!(login("wrong").await.unwrap().status(), 401);
    let signed_in = login(TOKEN).await.unwrap();
    assert_eq!(signed_in.status(), 303);
    let session = set_cookie(&signed_in, "triage_admin").expect("a session cookie");
    let with_session = client()
        .get(&admin)
        .header(header::COOKIE, session)
        .send()
        .await
        .unwrap();
    assert_eq!(with_session.status(), 200);
}

#[tokio::test]
async fn each_sign_in_is_its_own_session_with_an_expiry_and_sign_out_ends_it() {
    let app = spawn_app().await;
    let base = serve_console(&app, Some(TOKEN)).await;
    let (csrf_cookie, csrf) = form_tokens(&format!("{base}/admin/login"), None).await;
    let sign_in = || async {
        let response = client()
            .post(format!("{base}/admin/login"))
            .header(header::COOKIE, &csrf_cookie)
            .form(&[("csrf", csrf.as_str()), ("token", TOKEN)])
            .send()
            .await
            .unwrap();
        let header = response
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .find(|v| v.starts_with("triage_admin="))
            .expect("a session cookie");
        assert!(header.contains("Max-Age="), "the session expires: {header}");
        header.split(';').next().unwrap().to_string()
    };
    let (first, second) = (sign_in().await, sign_in().await);
    assert_ne!(first, second, "a random session per sign-in");
    let overview = |session: &str| {
        client()
            .get(format!("{base}/admin"))
            .header(header::COOKIE, session.to_string())
            .send()
    };
    assert_eq!(overview(&first).await.unwrap().status(), 200);

    let signed_out = client()
        .post(format!("{base}/admin/logout"))
        .header(header::COOKIE, &first)
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(signed_out.status(), 303);
    assert_eq!(overview(&first).await.unwrap().status(), 303, "signed out");
    assert_eq!(overview(&second).await.unwrap().status(), 200);
    let forged = client()
        .post(format!("{base}/admin/logout"))
        .header(header::COOKIE, &second)
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert_eq!(overview(&second).await.unwrap().status(), 200);
}

#[tokio::test]
async fn the_redrive_confirmation_page_writes_nothing() {
    let app = spawn_app().await;
    dead_letters(&app, "content_policy", 2).await;
    let base = serve_console(&app, None).await;
    let (status, page) = get(&format!(
        "{base}/admin/dead-letters/redrive?reason=content_policy"
    ))
    .await;
    assert_eq!(status, 200);
    assert!(page.contains(r#"data-would-move="2""#), "{page}");
    assert_eq!(app.count("SELECT count(*) FROM operation_audit").await, 0);
    assert_eq!(app.status_counts().await.get("dead"), Some(&2));
}

#[tokio::test]
async fn bad_input_gets_a_4xx_that_says_what_is_wrong() {
    let app = spawn_app().await;
    let base = serve_console(&app, None).await;
    let cases = [
        ("/admin/tickets/not-a-ticket", 400, "is not a ticket id"),
        ("/admin/tickets?id=12", 400, "is not a ticket id"),
        (
            "/admin/tickets/6a1f2a52-64b0-4c51-9d0e-0d9b3b1c7a11",
            404,
            "no ticket",
        ),
        ("/admin/dead-letters?since=forever", 400, "since"),
        ("/admin/dead-letters/redrive", 400, "reason"),
        ("/admin/versions?from=triage-v3", 400, "both from and to"),
        (
            "/admin/versions?from=/gpt&to=triage-v4",
            400,
            "not prompt or prompt/model",
        ),
    ];
    for (path, want, says) in cases {
        let (status, body) = get(&format!("{base}{path}")).await;
        assert_eq!(status.as_u16(), want, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
    }
}

#[tokio::test]
async fn a_rate_limit_hold_is_shown_on_the_overview() {
    let app = spawn_app().await;
    let client_db = app.pool.get().await.unwrap();
    client_db
        .batch_execute(
            "INSERT INTO provider_rate_limit (provider, held_until)
             VALUES ('openai', now() + interval '90 seconds')",
        )
        .await
        .unwrap();
    let base = serve_console(&app, None).await;
    let (_, overview) = get(&format!("{base}/admin")).await;
    let held = overview
        .split(r#"data-held="openai">"#)
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_else(|| panic!("no hold shown: {overview}"));
    assert!(held.contains("s") || held.contains("min"), "{held}");
    assert_ne!(held.trim(), "0 s", "the 429's hold is shown: {held}");
}

#[tokio::test]
async fn the_quality_page_without_runs_says_how_to_make_one_and_refuses_a_bad_digest() {
    let app = spawn_app().await;
    let base = serve_console(&app, None).await;
    let (status, html) = get(&format!("{base}/admin/quality")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("No eval run on this set and split yet"),
        "{html}"
    );
    assert!(html.contains(triage::quality::set::SHIPPED_DIGEST));
    let (status, html) = get(&format!("{base}/admin/quality?set=nothex")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("64 hex digits"));
    let (status, _) = get(&format!("{base}/admin/quality?split=train")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_overviews_pause_switch_pauses_and_resumes_a_lane_audited_and_refuses_a_forged_post() {
    let app = spawn_app().await;
    let base = serve_console(&app, None).await;
    let overview = format!("{base}/admin");
    let (status, page) = get(&overview).await;
    assert_eq!(status, 200);
    assert!(page.contains(r#"data-paused="""#), "nothing paused: {page}");
    assert!(page.contains(r#"id="pause-deliveries""#), "{page}");
    let (cookie, token) = form_tokens(&overview, None).await;
    let post = |action: &'static str, site: &'static str, token: String| {
        client()
            .post(format!("{base}/admin/pause"))
            .header(header::COOKIE, &cookie)
            .header("sec-fetch-site", site)
            .form(&[
                ("csrf", token.as_str()),
                ("lane", "deliveries"),
                ("action", action),
                ("reason", "receiver outage"),
            ])
            .send()
    };
    assert_eq!(
        post("pause", "cross-site", token.clone())
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(app.count("SELECT count(*) FROM pause").await, 0);

    let paused = post("pause", "same-origin", token.clone()).await.unwrap();
    assert_eq!(paused.status(), 303, "back to the overview");
    let (_, page) = get(&overview).await;
    assert!(page.contains(r#"data-paused="deliveries""#), "{page}");
    assert!(page.contains("receiver outage") && page.contains(r#"id="resume-deliveries""#));
    let by: String = app
        .row("SELECT paused_by FROM pause WHERE lane = 'deliveries'")
        .await
        .get(0);
    assert!(by.starts_with("console, os-user "), "{by}");

    let resumed = post("resume", "same-origin", token).await.unwrap();
    assert_eq!(resumed.status(), 303);
    assert_eq!(app.count("SELECT count(*) FROM pause").await, 0);
    let audited = "SELECT count(*) FROM operation_audit WHERE op IN ('pause', 'resume') \
                   AND principal LIKE 'console, os-user %' AND status = 'ok'";
    assert_eq!(app.count(audited).await, 2);
}
