//! Integration tests against a real PostgreSQL: one binary, one module per capability.

mod audit;
mod budget;
mod console;
mod database_outage;
mod delivery;
mod erase;
mod eval;
mod helpers;
mod ingest;
mod injection;
mod lambda_events;
mod lanes;
mod ledger_partitions;
mod migrate;
mod migrate_resource;
mod observability;
mod operations;
mod rate_limit;
mod request_idempotency;
mod request_shape;
mod secrets;
mod security;
mod sweep;
mod tls;
mod tls_postgres;
mod worker;
