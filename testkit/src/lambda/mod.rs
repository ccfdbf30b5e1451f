//! Lambda-level tests: the real function binaries, started as Lambda starts them and driven
//! through the Runtime API over loopback, so what is tested is what `sam deploy` ships.
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use testkit::lambda::{events, Function, RuntimeApi};
//! let api = RuntimeApi::start().await;
//! let _function = Function::spawn("target/debug/triage-worker", &api, [("DATABASE_URL", "...")]);
//! let invocation = api.invoke(events::scheduled(), Duration::from_secs(30)).await;
//! let report = invocation.result.expect("the worker answered");
//! # }
//! ```

mod container;
pub mod events;
mod function;
mod runtime_api;

pub use container::{lookup, Container};
pub use function::{Function, Output};
pub use runtime_api::{FunctionError, Invocation, RuntimeApi};
