//! The HTTP API: one router, served by the api Lambda (through lambda_http) and by
//! `triage serve` / `triage dev`, where [`loopback`] guards it (loopback by default, a bearer
//! token and TLS beyond, the Host check on loopback) since no API Gateway stands in front.
//! An entry point: maps requests onto the pipeline (ingest, read) and its errors onto
//! problem+json; uses config and the domain too.

pub mod admin;
mod caller;
pub mod loopback;
mod problem;
mod rate;
mod subscriptions;
mod tickets;
mod tls_listener;
mod zendesk;

use std::sync::Arc;

use axum::{
    extract::DefaultBodyLimit,
    http::StatusCode,
    middleware,
    routing::{delete, get, post},
    Router,
};
use deadpool_postgres::Pool;

pub use caller::{Caller, READ_ALL_SCOPE, SUBSCRIPTIONS_READ_SCOPE, SUBSCRIPTIONS_WRITE_SCOPE};
pub use problem::Problem;
pub use tls_listener::{TlsFiles, TlsListener, TlsSetupError};

use crate::{config::Config, pipeline::cascade::switch};

#[derive(Clone)]
pub struct AppState {
    pub pool: Pool,
    pub config: Arc<Config>,
    /// The classifier a configured cascade was switched to, as this process last read it.
    pub live: Arc<switch::Live>,
}

impl AppState {
    pub fn new(pool: Pool, config: Arc<Config>) -> Self {
        Self {
            pool,
            config,
            live: Default::default(),
        }
    }
}

fn api_routes(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/tickets/{id}", get(tickets::show))
        .route(
            "/tickets/{id}/feedback",
            post(tickets::give_feedback).get(tickets::feedback_history),
        )
        .route(
            "/subscriptions",
            post(subscriptions::create).get(subscriptions::list),
        )
        .route("/subscriptions/{id}", delete(subscriptions::delete))
        .route("/subscriptions/{id}/rotate", post(subscriptions::rotate))
        // Every API route counts against the caller's rate (`TRIAGE_CALLER_RPM`): the routes
        // above here, and `POST /tickets` in its own statement (`rate`).
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            rate::per_caller,
        ))
        .route("/tickets", post(tickets::create))
}

/// Routes that authenticate themselves (a desk's signed webhook): no caller, no caller's rate.
fn connector_routes() -> Router<AppState> {
    Router::new().route("/connectors/zendesk/events", post(zendesk::events))
}

/// Problem+json for unknown paths and methods, the body limit, and the state.
fn finish(routes: Router<AppState>, state: AppState) -> Router {
    let body_limit = state.config.limits.max_body_bytes;
    routes
        .fallback(|| async { Problem::not_found("no such resource") })
        .method_not_allowed_fallback(|| async {
            Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed on this resource",
            )
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

/// The API's router, as the api Lambda serves it (API Gateway authenticates the caller).
pub fn router(state: AppState) -> Router {
    finish(api_routes(&state).merge(connector_routes()), state)
}

/// What the local server serves, decided by `triage serve` with [`loopback::Door::decide`]
/// before anything binds.
pub struct LocalServer {
    /// The API; `None`, not served (a non-loopback address without `--allow-remote-api`).
    pub api: Option<loopback::ApiGuard>,
    /// The operator console; `None`, not served.
    pub console: Option<admin::Guard>,
}

/// The local server's router: what `server` serves, and on a `loopback` listener only to
/// requests addressed to loopback (every route: the API as much as the console).
pub fn local_router(state: AppState, server: LocalServer, loopback: bool) -> Router {
    let api = match server.api {
        None => Router::new(),
        Some(guard) => guard.protect(api_routes(&state)).merge(connector_routes()),
    };
    let mut app = finish(api, state.clone());
    if let Some(guard) = server.console {
        app = app.merge(admin::router(state, guard));
    }
    if loopback {
        app = app.layer(middleware::from_fn(loopback::require_loopback_host));
    }
    app
}

/// Serves the local router on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    server: LocalServer,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_on(listener, state, server, shutdown).await
}

/// The same over TLS, where the console's cookies are `Secure`.
pub async fn serve_tls(
    listener: TlsListener,
    state: AppState,
    mut server: LocalServer,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    server.console = server.console.map(admin::Guard::over_tls);
    serve_on(listener, state, server, shutdown).await
}

async fn serve_on<L: axum::serve::Listener<Addr = std::net::SocketAddr>>(
    listener: L,
    state: AppState,
    server: LocalServer,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let loopback = listener.local_addr()?.ip().is_loopback();
    axum::serve(listener, local_router(state, server, loopback))
        .with_graceful_shutdown(shutdown)
        .await
}
