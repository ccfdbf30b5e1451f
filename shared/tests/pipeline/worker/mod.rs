//! The worker against a fake provider over loopback: billing once, fencing, the error table,
//! backoff, the breaker, and the ledger.
//! - `billing`: one billed call a ticket, a result reused, ten workers billing every key
//!   once, fencing a stale worker, and the ledger's rows for hung and crashed calls.
//! - `errors`: the error table: crashes, permanent errors, contract violations and
//!   truncated answers dead-lettered; transient errors backed off; 429s released.
//! - `breaker`: provider-wide failures pause claiming, and a probe closes the breaker.
//! - `invocation`: an invocation's bounds: its call timeout, its batch.
//! - `leases`: leases that follow the work: renewed under a long call, a crashed holder's
//!   jobs claimed again after one lease, a stalled holder fenced out, a server restart.
//! - `slots`: calls in flight hold no connection, the next batch claimed while slots are
//!   busy, the worker's statements keep custom plans.

mod billing;
mod breaker;
mod errors;
mod invocation;
mod leases;
mod slots;

use crate::helpers::TestApp;

async fn post(app: &TestApp, subject: &str) -> String {
    let created = app.post_ticket(subject, "body of the ticket").await;
    assert_eq!(created.status, 201);
    created.body["id"].as_str().unwrap().to_string()
}
