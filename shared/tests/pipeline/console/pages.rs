//! The console over real HTTP: what each page shows and what it never shows.

use axum::{body::Body, http::Request};
use reqwest::{header, StatusCode};

use super::{client, dead_letters, form_tokens, get, seeded_run, serve_console, MARKER};
use crate::helpers::spawn_app;

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
