//! Each caller's request rate (`TRIAGE_CALLER_RPM`, `pipeline::limits::caller_rate`): every API
//! route counts, before the handler runs; past the rate, 429 problem+json with `Retry-After`
//! (seconds to the next minute) and nothing done. A request that names no principal passes on
//! to its handler, which refuses it as before.

use axum::{
    extract::{Request, State},
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{AppState, Caller, Problem};
use crate::pipeline::limits::caller_rate;

pub async fn per_caller(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(limit) = state.config.limits.caller_rpm else {
        return next.run(request).await;
    };
    let Ok(caller) = Caller::from_extensions(request.extensions()) else {
        return next.run(request).await;
    };
    match caller_rate::count(&state.pool, &caller.owner(), limit).await {
        Ok(None) => next.run(request).await,
        Ok(Some(retry_after)) => Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("this caller made its {limit} requests of this minute; retry after it ends"),
        )
        .retry_after(retry_after)
        .into_response(),
        Err(error) => Problem::from(error).into_response(),
    }
}
