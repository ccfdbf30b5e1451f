//! Each caller's request rate (`TRIAGE_CALLER_RPM`, `pipeline::limits::caller_rate`): every API
//! route counts, before the handler runs; past the rate, 429 problem+json with `Retry-After`
//! (seconds to the next minute) and nothing done. A request that names no principal passes on
//! to its handler, which refuses it as before. `POST /tickets` counts in ingest's own statement
//! (one round trip for the ticket and its counts), and here only what it refuses before ingest
//! or sends with an `Idempotency-Key` ([`count`]).

use std::time::Duration;

use axum::{
    extract::{Request, State},
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{AppState, Caller, Problem};
use crate::pipeline::limits::caller_rate;

pub async fn per_caller(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Ok(caller) = Caller::from_extensions(request.extensions()) else {
        return next.run(request).await;
    };
    match count(&state, &caller).await {
        Ok(()) => next.run(request).await,
        Err(problem) => problem.into_response(),
    }
}

/// Counts one request of `caller` (nothing without a rate); past the rate, its 429.
pub async fn count(state: &AppState, caller: &Caller) -> Result<(), Problem> {
    let Some(limit) = state.config.limits.caller_rpm else {
        return Ok(());
    };
    match caller_rate::count(&state.pool, &caller.owner(), limit).await {
        Ok(None) => Ok(()),
        Ok(Some(retry_after)) => Err(too_many(limit, retry_after)),
        Err(error) => Err(Problem::from(error)),
    }
}

/// The 429 of a caller past its `limit` requests of the minute.
pub fn too_many(limit: u32, retry_after: Duration) -> Problem {
    Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("this caller made its {limit} requests of this minute; retry after it ends"),
    )
    .retry_after(retry_after)
}
