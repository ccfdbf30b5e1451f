//! The console's guards over real HTTP: CSRF, the Host check, sign-in and sessions.

use reqwest::header;

use super::{client, dead_letters, form_tokens, get, serve_console, set_cookie, TOKEN};
use crate::helpers::spawn_app;

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
