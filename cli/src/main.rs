//! `triage`: the whole pipeline from one binary, configured by SPEC's environment names.

mod eval;
mod local_postgres;
mod shutdown;
mod tables;

use std::{
    io::IsTerminal,
    net::SocketAddr,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use triage::{
    aws::{eventbridge, lambda::config_from_env},
    config::Config,
    db,
    http::{self, admin, loopback},
    operations,
    pipeline::{
        delivery,
        sweep::Sweeper,
        worker::{self, Worker},
    },
    providers::AnyProvider,
    secret::{ExposeSecret, Secret},
    telemetry,
};

#[derive(Parser)]
#[command(
    name = "triage",
    version,
    about = "LLM ticket triage on a transactional outbox"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print the operation's result as JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Apply migrations/ (idempotent, safe to run concurrently).
    Migrate,
    /// Serve the HTTP API, and the operator console at /admin (each loopback only by default).
    Serve {
        #[arg(long, default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
        #[command(flatten)]
        console: ConsoleAccess,
    },
    /// Evaluate pending tickets: one invocation with --once, else until SIGTERM/SIGINT.
    Worker {
        #[arg(long)]
        once: bool,
    },
    /// Return expired leases (and collect provider batches): one pass with --once, else until
    /// SIGTERM/SIGINT.
    Sweeper {
        #[arg(long)]
        once: bool,
    },
    /// Deliver results to subscribers: one invocation with --once, else until SIGTERM/SIGINT.
    Deliver {
        #[arg(long)]
        once: bool,
    },
    /// Read a help desk's history into a labelled set (docs/zendesk.md).
    Import {
        #[command(subcommand)]
        source: ImportSource,
    },
    #[command(flatten)]
    Operation(operations::Request),
    /// Everything locally: a throwaway PostgreSQL when DATABASE_URL is unset, migrations,
    /// the API, and worker, deliverer and sweeper on a short schedule.
    Dev {
        #[arg(long, default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
        #[command(flatten)]
        console: ConsoleAccess,
    },
}

#[derive(Subcommand)]
enum ImportSource {
    /// Solved and closed tickets of TRIAGE_ZENDESK_URL's account (incremental export, cursor
    /// based; resumes from FILE.cursor), written as JSONL rows for `triage train` and `triage eval`.
    Zendesk {
        /// How far back: 90s, 30m, 2h, 30d.
        #[arg(long)]
        since: operations::HumanDuration,
        #[arg(long)]
        out: PathBuf,
        /// The taxonomy whose zendesk_group_id map groups back to departments (default:
        /// TRIAGE_POLICY_VERSION).
        #[arg(long)]
        taxonomy: Option<String>,
    },
}

/// Who may reach the local server beyond loopback, and over what (docs/console.md,
/// docs/runbook.md "Security"). Tokens are read from TRIAGE_ADMIN_TOKEN and TRIAGE_API_TOKEN
/// only, never from a flag, so they do not show in the process list.
#[derive(Args)]
struct ConsoleAccess {
    /// Also serve /admin when --listen is not a loopback address; requires TRIAGE_ADMIN_TOKEN
    /// (at least 24 characters).
    #[arg(long)]
    allow_remote_admin: bool,
    /// Also serve the API (/tickets) when --listen is not a loopback address; requires
    /// TRIAGE_API_TOKEN (at least 24 characters), sent as `Authorization: Bearer`.
    #[arg(long)]
    allow_remote_api: bool,
    /// Serve HTTPS with this certificate chain (PEM, leaf first); required when --listen is not
    /// a loopback address.
    #[arg(long, env = "TRIAGE_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "TRIAGE_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

impl ConsoleAccess {
    fn tls_files(&self) -> Option<http::TlsFiles> {
        Some(http::TlsFiles {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
        })
    }
}

/// How often the long-running worker and sweeper look again when idle.
pub(crate) const WORKER_IDLE: Duration = Duration::from_secs(1);
const SWEEP_EVERY: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // An operation prints a table (or JSON) on stdout: its logs stay below it unless asked for.
    let format = std::env::var("RUST_LOG_FORMAT").ok();
    let format = telemetry::LogFormat::choose(format.as_deref(), std::io::stderr().is_terminal());
    telemetry::init_cli(format, matches!(cli.command, Command::Operation(_)));
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            shutdown::signal().await;
            stop.cancel();
        }
    });
    match cli.command {
        Command::Migrate => {
            let config = config_from_env().await?;
            let applied = db::migrate(&config.database).await?;
            println!("migrations applied: {applied}");
        }
        Command::Serve { listen, console } => {
            serve(Arc::new(config_from_env().await?), listen, &console, stop).await?
        }
        Command::Worker { once } => {
            let config = Arc::new(config_from_env().await?);
            let worker = build_worker(&config)?;
            if once {
                let deadline = Instant::now() + config.worker.invocation_budget;
                let report = worker.run_invocation(deadline, &stop).await?;
                println!("{}", serde_json::to_string(&report)?);
            } else {
                worker::run_until_stopped(&worker, WORKER_IDLE, stop).await?;
            }
        }
        Command::Sweeper { once } => {
            let config = Arc::new(config_from_env().await?);
            let sweeper = Sweeper::new(db::pool(&config.database)?, config.clone())?;
            if once {
                let deadline = Instant::now() + config.worker.invocation_budget;
                let report = operations::sweep(&sweeper, deadline).await?;
                println!("{}", serde_json::to_string(&report)?);
            } else {
                sweep_until_stopped(&sweeper, &config, stop).await;
            }
        }
        Command::Deliver { once } => {
            let config = Arc::new(config_from_env().await?);
            let deliverer = eventbridge::deliverer(db::pool(&config.database)?, config.clone())?;
            if once {
                let deadline = Instant::now() + config.worker.invocation_budget;
                let report = deliverer.run_invocation(deadline, &stop).await?;
                println!("{}", serde_json::to_string(&report)?);
            } else {
                delivery::run_until_stopped(&deliverer, WORKER_IDLE, stop).await?;
            }
        }
        Command::Import {
            source:
                ImportSource::Zendesk {
                    since,
                    out,
                    taxonomy,
                },
        } => {
            let config = config_from_env().await?;
            let pool = db::pool(&config.database)?;
            let run = operations::import::ImportZendesk {
                since: since.0,
                out,
                policy_version: taxonomy.unwrap_or_else(|| config.versions.policy.to_string()),
                requests_per_minute: operations::import::EXPORT_RPM,
            };
            let imported =
                operations::import::zendesk(&pool, &config.zendesk, config.delivery.timeout, &run)
                    .await?;
            println!("{}", serde_json::to_string(&imported)?);
        }
        Command::Operation(request) => operate(request, cli.json, stop).await?,
        Command::Dev { listen, console } => {
            let mut config = config_from_env().await?;
            let _local = if config.database.url.expose_secret().is_empty() {
                let pg = local_postgres::LocalPostgres::start()?;
                config.database.url = Secret::from(pg.url.clone());
                eprintln!("triage dev: throwaway PostgreSQL at {}", pg.shown_url());
                Some(pg)
            } else {
                None
            };
            db::migrate(&config.database).await?;
            let config = Arc::new(config);
            let worker = build_worker(&config)?;
            let pool = db::pool(&config.database)?;
            let deliverer = eventbridge::deliverer(pool.clone(), config.clone())?;
            let sweeper = Sweeper::new(pool, config.clone())?;
            let (served, worked, delivered, ()) = tokio::join!(
                serve(config.clone(), listen, &console, stop.clone()),
                worker::run_until_stopped(&worker, WORKER_IDLE, stop.clone()),
                delivery::run_until_stopped(&deliverer, WORKER_IDLE, stop.clone()),
                sweep_until_stopped(&sweeper, &config, stop.clone()),
            );
            served?;
            worked?;
            delivered?;
        }
    }
    Ok(())
}

/// The operations run here exactly as in the ops Lambda; only the printing differs, and
/// `triage eval` brings workers of its own to answer its jobs while it waits.
async fn operate(
    request: operations::Request,
    json: bool,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let config = Arc::new(config_from_env().await?);
    let pool = db::pool(&config.database)?;
    let operator = operations::Operator::os_user();
    let outcome = match &request {
        operations::Request::Eval {
            list: false,
            by_time: false,
            ..
        } => eval::run(&pool, &config, request, &operator, stop).await?,
        _ => operations::run(&pool, &config, request, &operator).await?,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        print!("{}", tables::outcome(&outcome));
    }
    let complete = match &outcome {
        operations::Outcome::Eval(report) => report.complete,
        operations::Outcome::Sweep(sweep) => sweep.complete,
        _ => true,
    };
    if !complete {
        anyhow::bail!("stopped before every answer was in; run the same command again to continue");
    }
    Ok(())
}

pub(crate) fn build_worker(config: &Arc<Config>) -> anyhow::Result<Worker<AnyProvider>> {
    let provider = AnyProvider::from_config(&config.provider, config.worker.call_timeout)?;
    Ok(Worker::new(
        db::pool(&config.database)?,
        provider,
        config.clone(),
    )?)
}

async fn serve(
    config: Arc<Config>,
    listen: SocketAddr,
    access: &ConsoleAccess,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let token = |door: &loopback::Door| std::env::var(door.token_env).ok().map(Secret::from);
    let decide = |door: &loopback::Door, allowed| -> anyhow::Result<Option<Option<Secret>>> {
        match door
            .decide(listen, allowed, token(door))
            .map_err(anyhow::Error::msg)?
        {
            loopback::Exposure::Served { token } => Ok(Some(token)),
            loopback::Exposure::NotServed { why } => {
                eprintln!("triage: {why}");
                Ok(None)
            }
        }
    };
    let api = decide(&loopback::API, access.allow_remote_api)?;
    let console = decide(&loopback::CONSOLE, access.allow_remote_admin)?;
    if api.is_none() && console.is_none() {
        anyhow::bail!(
            "nothing to serve on {listen}: give --allow-remote-api and/or --allow-remote-admin \
             with their tokens, or listen on loopback"
        );
    }
    let tls_files = access.tls_files();
    loopback::require_tls_off_loopback(listen, tls_files.is_some()).map_err(anyhow::Error::msg)?;
    let tls = tls_files.as_ref().map(http::TlsFiles::load).transpose()?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    // The bound address, not the asked one: with port 0 the tests learn the port from it.
    let bound = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let signed = |token: &Option<Secret>| {
        if token.is_some() {
            " (token required)"
        } else {
            ""
        }
    };
    if let Some(token) = &api {
        eprintln!(
            "triage: API listening on {scheme}://{bound}{}",
            signed(token)
        );
    }
    if let Some(token) = &console {
        eprintln!(
            "triage: operator console at {scheme}://{bound}/admin{}",
            signed(token)
        );
    }
    let server = http::LocalServer {
        api: api.map(loopback::ApiGuard::new),
        console: console.map(admin::Guard::new),
    };
    let pool = db::pool(&config.database)?;
    let state = http::AppState::new(pool, config);
    let shutdown = async move { stop.cancelled().await };
    match tls {
        None => http::serve(listener, state, server, shutdown).await?,
        Some(tls) => {
            let listener = http::TlsListener::new(listener, tls);
            http::serve_tls(listener, state, server, shutdown).await?
        }
    }
    Ok(())
}

async fn sweep_until_stopped(sweeper: &Sweeper, config: &Config, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let deadline = Instant::now() + config.worker.invocation_budget;
        if let Err(error) = operations::sweep(sweeper, deadline).await {
            tracing::warn!(%error, "sweep failed; retrying");
        }
        tokio::select! { _ = stop.cancelled() => {}, _ = tokio::time::sleep(SWEEP_EVERY) => {} }
    }
}

#[cfg(test)]
mod tests;
