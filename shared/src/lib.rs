//! triage: LLM ticket triage outside the request path, on a transactional outbox with a
//! content-derived idempotency key.
//!
//! Layers, top to bottom (docs/architecture.md); a module uses only those below it:
//! - entry points: [`http`] (the API router, the console), [`operations`] (what on-call runs);
//! - [`quality`]: labelled sets, eval runs, metrics, the promote gate, thresholds;
//! - [`aws`]: Secrets Manager, the migration custom resource, S3, Lambda glue;
//! - the pipeline: [`pipeline`] (ingest → outbox → worker → sweep, in inner layers of its own);
//! - [`config`]: the one typed configuration, plain data read from the environment;
//! - providers and infrastructure: [`providers`] (prompts, providers, contract, prices),
//!   [`db`] (pool, migrations), [`tls`], [`secret`], [`telemetry`];
//! - [`domain`]: the key, ticket ids, row ids, versions, errors.
//!
//! A ticket's path by file name: `domain/key` → `pipeline/ingest` → `pipeline/outbox/claim`
//! → `pipeline/worker` (`providers/*`, `pipeline/turn`, `pipeline/outbox/job`) →
//! `pipeline/sweep`.

pub mod aws;
pub mod config;
pub mod connectors;
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
