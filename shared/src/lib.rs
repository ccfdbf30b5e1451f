//! triage: LLM ticket triage outside the request path, on a transactional outbox with a
//! content-derived idempotency key.
//!
//! Layers, top to bottom (docs/architecture.md); a module uses only those below it:
//! - entry points: [`http`] (the API router), [`operations`] (what on-call runs), [`aws`]
//!   (Secrets Manager, the migration custom resource, Lambda glue);
//! - the pipeline: [`pipeline`] (ingest → outbox → worker → sweep, and its reports);
//! - [`config`]: the one typed configuration, plain data read from the environment;
//! - evaluation and infrastructure: [`providers`] (prompts, providers, contract, prices),
//!   [`db`] (pool, migrations), [`tls`], [`secret`], [`telemetry`];
//! - [`domain`]: the key, ticket ids, versions, errors.
//!
//! A ticket's path by file name: `domain/key` → `pipeline/ingest` → `pipeline/outbox/claim`
//! → `pipeline/worker` (`providers/*`, `pipeline/outbox/job`) → `pipeline/sweep`.

pub mod aws;
pub mod config;
pub mod db;
pub mod domain;
pub mod http;
pub mod operations;
pub mod pipeline;
pub mod providers;
pub mod quality;
pub mod secret;
pub mod telemetry;
pub mod tls;

pub use domain::error::{Error, Result};
