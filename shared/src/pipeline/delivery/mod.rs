//! Delivery (docs/delivery.md): each stored result reaches its subscribers, at least once and
//! never before its commit. `outbox::announce` writes one delivery row per subscriber in the
//! result's own statement; [`claimed`] is the delivery queue (claimed, leased, fenced and swept by the
//! evaluation outbox's machinery, `outbox::lease`); [`deliverer`] runs an invocation;
//! [`webhook`] signs per Standard Webhooks and sends, [`bus`] puts events on EventBridge, [`address`] keeps webhooks off private
//! networks (SSRF); [`decision`] is the pure retry / disable decision; [`subscription`] the
//! callers' endpoints; [`status`] the operators' view, the lag metric and replay; [`zendesk`]
//! writes answers back to a desk's Zendesk tickets.
//! Uses config, db, telemetry and domain, and the pipeline's outbox and backoff.

pub mod address;
pub mod bus;
pub mod claimed;
pub mod decision;
pub mod deliverer;
pub mod status;
pub mod subscription;
pub mod webhook;
pub mod zendesk;

pub use deliverer::{run_until_stopped, Deliverer, Report};
