//! The HTTP API: one router, served by the api Lambda (through lambda_http) and by
//! `triage serve` / `triage dev`. An entry point: maps requests onto the pipeline (ingest,
//! read) and its errors onto problem+json; uses config and the domain too.

pub mod admin;
mod caller;
mod problem;
mod subscriptions;
mod tickets;

use std::sync::Arc;

use axum::{
    extract::DefaultBodyLimit,
    http::StatusCode,
    routing::{delete, get, post},
    Router,
};
use deadpool_postgres::Pool;

pub use caller::Caller;
pub use problem::Problem;

use crate::config::Config;

#[derive(Clone)]
pub struct AppState {
    pub pool: Pool,
    pub config: Arc<Config>,
}

pub fn router(state: AppState) -> Router {
    let body_limit = state.config.limits.max_body_bytes;
    Router::new()
        .route("/tickets", post(tickets::create))
        .route("/tickets/{id}", get(tickets::show))
        .route(
            "/subscriptions",
            post(subscriptions::create).get(subscriptions::list),
        )
        .route("/subscriptions/{id}", delete(subscriptions::delete))
        .route("/subscriptions/{id}/rotate", post(subscriptions::rotate))
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

/// The local server's router: the API, plus the operator console when `console` is given
/// (`triage serve` decides that with [`admin::Exposure`]).
pub fn local_router(state: AppState, console: Option<admin::Guard>) -> Router {
    match console {
        Some(guard) => router(state.clone()).merge(admin::router(state, guard)),
        None => router(state),
    }
}

/// Serves the local router on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    console: Option<admin::Guard>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, local_router(state, console))
        .with_graceful_shutdown(shutdown)
        .await
}
