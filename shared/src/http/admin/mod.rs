//! The operator's console: server-rendered HTML at `/admin`, served by `triage serve` and
//! `triage dev` only (never by the API Lambda, whose router has no such route).
//!
//! Owns: the console's pages, its sign-in and CSRF protection ([`security`]), its charts and
//! its few reads that no report already makes ([`queries`]). An entry point beside the API:
//! uses the operations (`operations::run`, `shadow`), the pipeline's reads (`report`,
//! `read`), db and the domain, as the CLI does; nothing uses it but `http::serve`. Ticket text
//! appears on the one-ticket page and, for eval tickets only, on the Quality page.

mod charts;
mod dead_letters;
mod deliveries;
mod layout;
mod overview;
mod pause;
mod quality;
mod queries;
pub mod security;
mod ticket;
mod versions;

use std::sync::Arc;

use axum::{
    extract::{rejection::FormRejection, DefaultBodyLimit, Request, State},
    http::{header, HeaderMap, Method, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Form, Router,
};
use maud::html;
use serde::Deserialize;

pub use security::Guard;

use super::AppState;
use layout::{html_response, page, PageError, Section};

/// What the console's handlers share: the API's pool and configuration, and its guard.
#[derive(Clone)]
struct ConsoleState {
    app: AppState,
    guard: Arc<Guard>,
}

/// Forms are a few fields; anything larger is not from the console.
const FORM_LIMIT: usize = 16 * 1024;

/// The console's routes, all under `/admin`, to be merged into the local server's router.
pub fn router(app: AppState, guard: Guard) -> Router {
    let state = ConsoleState {
        app,
        guard: Arc::new(guard),
    };
    let pages = Router::new()
        .route("/admin", get(overview::show))
        .route("/admin/dead-letters", get(dead_letters::show))
        .route(
            "/admin/dead-letters/redrive",
            get(dead_letters::confirm).post(dead_letters::redrive),
        )
        .route("/admin/pause", post(pause::toggle))
        .route("/admin/deliveries", get(deliveries::show))
        .route("/admin/versions", get(versions::show))
        .route("/admin/quality", get(quality::show))
        .route("/admin/tickets", get(ticket::lookup))
        .route("/admin/tickets/{id}", get(ticket::show))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_sign_in,
        ));
    Router::new()
        .route("/admin/login", get(login_form).post(login))
        .route("/admin/logout", post(logout))
        .merge(pages)
        .layer(DefaultBodyLimit::max(FORM_LIMIT))
        .with_state(state)
}

/// Without a session, a page view goes to the sign-in form; anything else is a 401. (On a
/// loopback listener, the local server has already refused any other Host: `http::local`.)
async fn require_sign_in(
    State(state): State<ConsoleState>,
    request: Request,
    next: Next,
) -> Response {
    if state.guard.is_signed_in(request.headers()) {
        return next.run(request).await;
    }
    if request.method() == Method::GET {
        return Redirect::to("/admin/login").into_response();
    }
    PageError {
        status: StatusCode::UNAUTHORIZED,
        detail: "sign in first: /admin/login".into(),
    }
    .into_response()
}

/// A page with forms: the CSRF token for them, and the cookie it is tied to when new.
fn with_csrf(
    guard: &Guard,
    headers: &HeaderMap,
    status: StatusCode,
    render: impl FnOnce(&str) -> maud::Markup,
) -> Response {
    let (token, set_cookie) = guard.csrf(headers);
    let mut response = html_response(status, render(&token));
    if let Some(cookie) = set_cookie {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// A form that changes something: it carries the page's CSRF token.
trait Posted {
    fn csrf(&self) -> &str;
}

/// A POSTed form, parsed (a 400 that names the field otherwise) and checked against
/// cross-site requests (a 403 that says which check failed).
fn posted<T: Posted>(
    guard: &Guard,
    headers: &HeaderMap,
    form: Result<Form<T>, FormRejection>,
) -> Result<T, PageError> {
    let Form(value) = form.map_err(|rejection| PageError::bad_request(rejection.body_text()))?;
    guard
        .check_post(headers, value.csrf())
        .map_err(PageError::forbidden)?;
    Ok(value)
}

async fn login_form(State(state): State<ConsoleState>, headers: HeaderMap) -> Response {
    if !state.guard.requires_token() {
        return Redirect::to("/admin").into_response();
    }
    sign_in_page(&state.guard, &headers, StatusCode::OK, None)
}

fn sign_in_page(
    guard: &Guard,
    headers: &HeaderMap,
    status: StatusCode,
    error: Option<&str>,
) -> Response {
    with_csrf(guard, headers, status, |csrf| {
        page(
            Section::SignIn,
            "Sign in",
            html! {
                @if let Some(error) = error { p.alert role="alert" { (error) } }
                p { "The console needs the operator token ("
                    code { (crate::http::loopback::CONSOLE.token_env) } " of the server)." }
                form method="post" action="/admin/login" {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="token" { "Operator token" }
                    input id="token" name="token" type="password" autocomplete="current-password" required;
                    " "
                    button type="submit" { "Sign in" }
                }
            },
        )
    })
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    csrf: String,
}

impl Posted for LoginForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

async fn login(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    body: Result<Form<LoginForm>, FormRejection>,
) -> Result<Response, PageError> {
    let body = posted(&state.guard, &headers, body)?;
    if !state.guard.token_matches(&body.token) {
        tracing::warn!("console sign-in refused: wrong token");
        return Ok(sign_in_page(
            &state.guard,
            &headers,
            StatusCode::UNAUTHORIZED,
            Some("That is not the operator token."),
        ));
    }
    let session = state.guard.start_session();
    let mut response = Redirect::to("/admin").into_response();
    response
        .headers_mut()
        .append(header::SET_COOKIE, state.guard.session_cookie(&session));
    Ok(response)
}

/// Sign-out: ends this browser's session and clears its cookie. Only from the console's own
/// pages (same origin); forging it would only sign someone out.
async fn logout(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    security::same_origin(&headers).map_err(PageError::forbidden)?;
    state.guard.end_session(&headers);
    let mut response = Redirect::to("/admin/login").into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        security::expired_cookie(security::SESSION_COOKIE),
    );
    Ok(response)
}
