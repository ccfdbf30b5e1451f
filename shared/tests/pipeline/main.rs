//! Integration tests against a real PostgreSQL: one binary, one module per capability.

mod helpers;
mod ingest;
mod lambda_events;
mod migrate;
mod observability;
mod operations;
mod request_idempotency;
mod sweep;
mod worker;
