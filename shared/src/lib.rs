//! triage: LLM ticket triage outside the request path, on a transactional outbox with a
//! content-derived idempotency key.
//!
//! A ticket's path through the modules: [`key`] → [`ingest`] → [`outbox`] (claim, finish,
//! reschedule, dead letter) → [`evaluate`] → [`sweep`]; [`ticket`] is the read side and
//! [`http`] the API over both. Operations on the pipeline ([`reprocess`], [`shadow`],
//! [`promote`], [`redrive`], [`prompt_registry`]) meet in [`ops`].

pub mod backoff;
pub mod breaker;
pub mod config;
pub mod db;
pub mod error;
pub mod evaluate;
pub mod http;
pub mod ingest;
pub mod key;
pub mod ledger;
pub mod migrate_resource;
pub mod ops;
pub mod outbox;
pub mod promote;
pub mod prompt_registry;
pub mod redrive;
pub mod report;
pub mod reprocess;
pub mod secrets;
pub mod shadow;
pub mod shutdown;
pub mod sweep;
pub mod telemetry;
pub mod ticket;
pub mod tls;
pub mod worker;

pub use error::{Error, Result};
