//! The pipeline, in the ticket's order: [`ingest`] writes ticket and job in one statement,
//! [`outbox`] claims jobs and changes their state (fenced), [`answering`] holds the policy and
//! prompts each job is answered under (the built-in one, or a stored [`taxonomy`]),
//! [`worker`] runs one invocation
//! ([`cascade`]: a local classifier first, provisional answers while the model is away;
//! [`batch_tier`]: provider batches), [`turn`] decides and writes what becomes of a job's
//! turn, [`sweep`] returns expired leases; [`delivery`] announces results to subscribers;
//! [`ledger`] records every provider call; [`limits`] bound the work (backoff, breaker, rate
//! limit, daily budget, fleet size); [`pause`] is the operator's switch on lanes and
//! deliveries; [`feedback`] takes the help desk's labels and keeps agreement's totals;
//! [`erase`] forgets tickets; [`reads`] is the read side; [`invocation`] is the loop the
//! runners share; [`zendesk`] is the Zendesk connector's steps (events in, corrections).
//! Inner layers (docs/architecture.md): the runners (worker, delivery, sweep)
//! use the steps, the ledger, the outbox's machinery and the limits below them, never each
//! other. Uses config, providers, db, telemetry and domain; never an entry point.

pub mod answering;
pub mod batch_tier;
pub mod cascade;
pub mod delivery;
pub mod erase;
pub mod feedback;
pub mod ingest;
pub mod invocation;
pub mod ledger;
pub mod limits;
pub mod outbox;
pub mod pause;
pub mod prompt_registry;
pub mod reads;
pub mod sweep;
pub mod taxonomy;
pub mod turn;
pub mod worker;
pub mod zendesk;
