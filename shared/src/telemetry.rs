//! Telemetry: structured JSON logs on stderr, and metrics in CloudWatch Embedded Metric
//! Format on stdout (flushed after every Lambda invocation). Ticket text and secrets never
//! go into a span, an event or a metric: handlers log ids and keys only.
//! Uses only the domain: callers pass plain numbers.

use tracing::{Level, Metadata};
use tracing_subscriber::{
    filter::filter_fn, fmt, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter,
};

/// The metric namespace in CloudWatch (alarms and the dashboard in `template.yaml` use it).
pub const NAMESPACE: &str = "Triage";

/// Installs the global subscriber once; later calls are no-ops (tests call it freely).
pub fn init() {
    // stdout carries command output and CloudWatch metrics (EMF); logs go to stderr.
    let _ = subscriber(std::io::stderr).try_init();
}

/// How the CLI writes its logs (`triage`; Lambda always writes JSON, [`init`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// JSON lines, as in Lambda: for log shippers, and wherever stderr is not a terminal.
    Json,
    /// One compact line per event, for a person at a terminal.
    Human,
}

impl LogFormat {
    /// `RUST_LOG_FORMAT` (`json` or `human`) when set; else human on a terminal, JSON elsewhere.
    pub fn choose(setting: Option<&str>, terminal: bool) -> Self {
        match setting.map(str::trim) {
            Some(f) if f.eq_ignore_ascii_case("json") => LogFormat::Json,
            Some(f) if f.eq_ignore_ascii_case("human") => LogFormat::Human,
            _ if terminal => LogFormat::Human,
            _ => LogFormat::Json,
        }
    }
}

/// The CLI's subscriber: `format`; for a command that prints a table, only warnings and errors
/// unless `RUST_LOG` asks for more, so log lines do not land in the table.
pub fn init_cli(format: LogFormat, prints_a_table: bool) {
    let default = if prints_a_table {
        "warn"
    } else {
        DEFAULT_FILTER
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = cli_subscriber(std::io::stderr, format, filter).try_init();
}

fn cli_subscriber<W>(
    writer: W,
    format: LogFormat,
    filter: EnvFilter,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    match format {
        LogFormat::Json => Box::new(subscriber_filtered(writer, filter)),
        LogFormat::Human => Box::new(
            fmt()
                .compact()
                .with_env_filter(filter)
                .with_target(false)
                .with_writer(writer)
                .finish()
                .with(filter_fn(within_caps)),
        ),
    }
}

/// The default filter when `RUST_LOG` is unset.
const DEFAULT_FILTER: &str = "info,refinery_core=warn,tokio_postgres=warn";

/// Libraries that log whole requests below info: lambda_runtime the raw event at trace (the
/// Authorization header and the ticket with it), hyper the bytes on the wire, tokio_postgres
/// each statement's parameters at debug (a ticket's subject and message), reqwest and the AWS
/// SDK (`aws_smithy_*`, `aws_sdk_*`, `aws_sigv4`, ...) requests and responses with their
/// headers and bodies. Capped at info whatever `RUST_LOG` says. An entry ending in `_` caps
/// every crate whose name starts with it.
const CAPPED_AT_INFO: [&str; 11] = [
    "lambda_runtime",
    "lambda_runtime_api_client",
    "lambda_http",
    "hyper",
    "hyper_util",
    "h2",
    "tokio_postgres",
    "postgres_protocol",
    "reqwest",
    "rustls",
    "aws_",
];

/// The one log format: JSON lines with the current span's fields (the Lambda request id),
/// filtered by `RUST_LOG`.
pub fn subscriber<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    subscriber_filtered(writer, filter)
}

/// The subscriber as `RUST_LOG=rust_log` would make it, set for the current thread until the
/// guard drops, with records of the `log` crate (tokio_postgres logs through it) forwarded as
/// `init` does: for a test that must see what a deployment with that `RUST_LOG` would write.
pub fn set_default_with<W>(writer: W, rust_log: &str) -> tracing::subscriber::DefaultGuard
where
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    subscriber_filtered(writer, EnvFilter::new(rust_log)).set_default()
}

fn subscriber_filtered<W>(writer: W, filter: EnvFilter) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_target(false)
        .flatten_event(true)
        .with_writer(writer)
        .finish()
        .with(filter_fn(within_caps))
}

fn within_caps(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    let capped = CAPPED_AT_INFO
        .iter()
        .any(|name| match name.strip_suffix('_') {
            Some(prefix) => target.starts_with(prefix) && target[prefix.len()..].starts_with('_'),
            None => target
                .strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::")),
        });
    !capped || *metadata.level() <= Level::INFO
}

/// The EMF recorder for a Lambda function: `metric::*` calls land in it and are flushed to
/// stdout with the request id after each invocation. Without it (CLI, tests) they are no-ops.
pub fn lambda_metrics(
    function: &'static str,
) -> Result<&'static metrics_cloudwatch_embedded::Collector, crate::Error> {
    metrics_cloudwatch_embedded::Builder::new()
        .cloudwatch_namespace(NAMESPACE)
        .with_dimension("function", function)
        .with_lambda_request_id("requestId")
        .init()
        .map_err(|e| crate::domain::error::ConfigError::invalid("metrics", e.to_string()).into())
}

/// Every metric the pipeline emits, by name, in one place.
pub mod metric {
    use std::time::Duration;

    use metrics::{counter, gauge, histogram};

    pub fn dedup_hit() {
        counter!("outbox.dedup_hit").increment(1);
    }
    pub fn evaluated() {
        counter!("outbox.evaluated").increment(1);
    }
    pub fn rescheduled(reason: &'static str) {
        counter!("outbox.rescheduled", "reason" => reason).increment(1);
    }
    pub fn dead_letter(reason: &str) {
        dead_letters(reason, 1);
    }
    pub fn dead_letters(reason: &str, count: i64) {
        counter!("outbox.dead_letter", "reason" => reason.to_string())
            .increment(count.max(0) as u64);
    }
    /// A job left to its lease because the database stayed away longer than it.
    pub fn abandoned() {
        counter!("outbox.abandoned").increment(1);
    }
    /// A job sent back because, under a daily budget, its model has no price.
    pub fn unpriced() {
        counter!("outbox.unpriced").increment(1);
    }
    /// A job (or the configured policy) whose taxonomy is not stored or does not read back as
    /// its version: its jobs wait (`TaxonomyUnusableAlarm`).
    pub fn taxonomy_unusable() {
        counter!("outbox.taxonomy_unusable").increment(1);
    }
    /// A retrain ended: `failing_runs` is how many in a row (this one included) did not switch
    /// (`RetrainFailingAlarm` at 3); 0 after one that switched.
    pub fn retrain(failing_runs: i64) {
        gauge!("models.retrain_failing_runs").set(failing_runs as f64);
    }
    /// A worker invocation refused because its times do not fit (`setting` is the one to change).
    pub fn invocation_refused(setting: &str) {
        counter!("worker.invocation_refused", "setting" => setting.to_string()).increment(1);
    }
    pub fn lease_expired(count: i64) {
        counter!("outbox.lease_expired").increment(count.max(0) as u64);
    }
    /// Rows a renewal found no longer held by their invocation (`outbox::renewal`): it was
    /// stalled past its lease, and its jobs were fenced out.
    pub fn leases_lost(count: u64) {
        counter!("outbox.lease_lost").increment(count);
    }
    /// One provider call: its latency, tokens in and out, and cost.
    pub fn provider_call(latency: Duration, tokens: (i64, i64), cost_usd: f64) {
        histogram!("provider.latency_ms").record(latency.as_secs_f64() * 1000.0);
        counter!("provider.tokens", "direction" => "input").increment(tokens.0.max(0) as u64);
        counter!("provider.tokens", "direction" => "output").increment(tokens.1.max(0) as u64);
        histogram!("provider.cost_usd").record(cost_usd);
    }
    /// A cascade's local classifier was asked: how long it took, and whether it was sure
    /// enough to answer (the share of local answers is the cascade's saving).
    /// A cascade's live precision from its audit (`quality::live`): the exact interval's
    /// bounds, how many audited answers it rests on, and whether it is suspended (its alarm).
    pub fn cascade_live(audited: u64, low: f64, high: f64, suspended: bool) {
        gauge!("cascade.audited").set(audited as f64);
        gauge!("cascade.precision_low").set(low);
        gauge!("cascade.precision_high").set(high);
        gauge!("cascade.suspended").set(if suspended { 1.0 } else { 0.0 });
    }
    /// A would-be-local answer drawn for the audit: the large model answers it too.
    pub fn audit_drawn() {
        counter!("cascade.audit_drawn").increment(1);
    }
    pub fn local_answer(latency: Duration, sure: bool) {
        histogram!("cascade.local_latency_ms").record(latency.as_secs_f64() * 1000.0);
        let stage = if sure { "local" } else { "model" };
        counter!("cascade.answered", "stage" => stage).increment(1);
    }
    /// The provider refused the shape of a request: a deployment fault, alarmed at once.
    pub fn request_rejected() {
        counter!("provider.request_rejected").increment(1);
    }
    pub fn queue_depth(status: &'static str, depth: i64) {
        gauge!("outbox.depth", "status" => status).set(depth as f64);
    }
    pub fn oldest_claimable_age(seconds: f64) {
        gauge!("outbox.oldest_claimable_age_seconds").set(seconds);
    }
    pub fn operation(op: &'static str) {
        counter!("ops.run", "op" => op).increment(1);
    }
    /// A claim refused because the day's spend reached the budget (the cost alarm's metric).
    pub fn budget_exhausted() {
        counter!("budget.exhausted").increment(1);
    }
    /// Spend since 00:00 UTC, as the budget saw it (the dashboard's spend widget).
    pub fn spent_today(usd: f64) {
        gauge!("budget.spent_today_usd").set(usd);
    }
    /// One webhook or bus delivery attempt, by outcome (`delivered`, `retry`, `refused`).
    pub fn delivery(outcome: &'static str) {
        counter!("delivery.attempt", "outcome" => outcome).increment(1);
    }
    /// A Zendesk safe update refused because an agent changed the ticket (docs/zendesk.md).
    pub fn zendesk_conflict() {
        counter!("zendesk.conflict").increment(1);
    }
    /// An endpoint disabled after failing for the whole retry window (alarmed).
    pub fn endpoint_disabled() {
        counter!("delivery.endpoint_disabled").increment(1);
    }
    /// Age of the oldest undelivered event: the delivery lag alarm's metric.
    pub fn oldest_undelivered_age(seconds: f64) {
        gauge!("delivery.oldest_undelivered_age_seconds").set(seconds);
    }
    /// Every production call's cost over the evaluations they produced (`triage stats`).
    pub fn cost_per_ticket(usd: f64) {
        gauge!("cost.per_ticket_usd").set(usd);
    }
    /// Lanes an operator paused, as the sweeper sees them: the pause alarm's metric (the age
    /// alarm counts no paused lane's jobs).
    pub fn paused_lanes(count: usize) {
        gauge!("ops.paused_lanes").set(count as f64);
    }
    /// The 7-day department agreement with the help desk's feedback (the quality alarm's
    /// metric), of the version it labelled most.
    pub fn department_agreement(share: f64) {
        gauge!("quality.department_agreement_7d").set(share);
    }
    pub fn breaker_open(open: bool) {
        gauge!("provider.breaker_open").set(if open { 1.0 } else { 0.0 });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn the_cli_writes_for_people_on_a_terminal_and_json_elsewhere_or_when_asked() {
        let table = [
            (None, true, LogFormat::Human),
            (None, false, LogFormat::Json),
            (Some("json"), true, LogFormat::Json),
            (Some("JSON"), true, LogFormat::Json),
            (Some("human"), false, LogFormat::Human),
            (Some("other"), true, LogFormat::Human),
            (Some("other"), false, LogFormat::Json),
        ];
        for (setting, terminal, expected) in table {
            assert_eq!(
                LogFormat::choose(setting, terminal),
                expected,
                "{setting:?} {terminal}"
            );
        }
        for (format, json) in [(LogFormat::Human, false), (LogFormat::Json, true)] {
            let captured = Arc::new(Mutex::new(Vec::<u8>::new()));
            let sink = captured.clone();
            let writer = move || WriteTo(sink.clone());
            let subscriber = cli_subscriber(writer, format, EnvFilter::new("info"));
            tracing::subscriber::with_default(subscriber, || {
                let span = tracing::info_span!("run", worker = "w-1");
                let _entered = span.enter();
                tracing::info!(complete = true, "eval run");
            });
            let text = String::from_utf8(captured.lock().unwrap().clone()).unwrap();
            assert!(text.contains("eval run"), "{text}");
            assert_eq!(
                text.trim_start().starts_with('{'),
                json,
                "{format:?}: {text}"
            );
        }
    }

    #[test]
    fn raw_events_statements_and_sdk_bodies_stay_out_of_the_logs_even_at_rust_log_trace() {
        let captured = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = captured.clone();
        let writer = move || WriteTo(sink.clone());
        let subscriber = subscriber_filtered(writer, EnvFilter::new("trace"));
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(
                target: "lambda_runtime::layers::api_response",
                body = "Authorization: Bearer SECRET-TOKEN",
                "raw JSON event received from Lambda"
            );
            tracing::debug!(target: "hyper::proto", "SECRET-WIRE-BYTES");
            tracing::debug!(target: "tokio_postgres::query", "SECRET-PARAMETERS");
            tracing::debug!(target: "reqwest::connect", "SECRET-HEADERS");
            tracing::trace!(target: "aws_smithy_runtime::client", "SECRET-BODY");
            tracing::trace!(target: "aws_sigv4::http_request", "SECRET-CANONICAL");
            tracing::info!(target: "lambda_runtime", "runtime info is kept");
            tracing::trace!(target: "triage::pipeline", "our own trace is kept");
            tracing::trace!(target: "awsome::thing", "a crate merely named alike is kept");
        });
        let logs = String::from_utf8(captured.lock().unwrap().clone()).unwrap();
        assert!(!logs.contains("SECRET"), "{logs}");
        assert!(logs.contains("runtime info is kept"), "{logs}");
        assert!(logs.contains("our own trace is kept"), "{logs}");
        assert!(logs.contains("named alike is kept"), "{logs}");
    }

    struct WriteTo(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for WriteTo {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
