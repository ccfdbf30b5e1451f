//! Delivery against real PostgreSQL and webhook receivers over loopback, whose deliveries are
//! verified with the Standard Webhooks reference library (PyPI `standardwebhooks`, installed
//! beside moto by `scripts/test`), not with our own signing code.
//! - `failures`: a receiver down then back, a deliverer killed mid-delivery, its expired
//!   leases, and an invocation too short for one delivery.
//! - `announcing`: what is announced, and once: rolled-back and committed results, a late
//!   duplicate, a reprocess result at its promotion.
//! - `subscriptions`: subscriptions per caller: isolation, rotation, the limit, pages.
//! - `openapi`: the subscription routes answer what openapi.yaml documents.
//! - `endpoints`: endpoints at private addresses refused, a slow or busy one holding only
//!   its own share, a disabled one on the console.
//! - `aws`: EventBridge to an SQS queue, and the deliverer's doorbell in template.yaml.

mod announcing;
mod aws;
mod endpoints;
mod failures;
mod openapi;
mod subscriptions;

use crate::helpers::{spawn_app_with, webhooks::fast_delivery, TestApp};

async fn spawn() -> TestApp {
    spawn_app_with(fast_delivery).await
}
