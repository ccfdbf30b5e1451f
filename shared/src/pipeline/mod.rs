//! The pipeline, in the ticket's order: [`ingest`] writes ticket and job in one statement,
//! [`outbox`] claims jobs and changes their state (fenced), [`worker`] runs one invocation,
//! [`sweep`] returns expired leases; [`delivery`] announces results to subscribers; [`budget`] caps the day's spend; [`erase`] forgets tickets; [`read`] and [`report`] are the read side.
//! Uses config, evaluate, db, telemetry and domain; never an entry point.

pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod delivery;
pub mod erase;
pub mod fleet;
pub mod ingest;
pub mod ledger;
pub mod outbox;
pub mod prompt_registry;
pub mod rate_limit;
pub mod read;
pub mod report;
pub mod sweep;
pub mod worker;
