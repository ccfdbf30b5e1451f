//! Structured JSON logs on stderr (CloudWatch reads both streams). Ticket text and
//! secrets are never put in a span or event; handlers log ids and keys only.

use tracing_subscriber::{fmt, EnvFilter};

/// Installs the global subscriber once; later calls are no-ops (tests call it freely).
pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,refinery_core=warn,tokio_postgres=warn"));
    let _ = fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_target(false)
        .flatten_event(true)
        // stdout carries command output and CloudWatch metrics (EMF); logs go to stderr.
        .with_writer(std::io::stderr)
        .try_init();
}
