//! `triage`: the whole pipeline from one binary, configured by SPEC's environment names.

mod eval;
mod local_postgres;
mod serve;
mod shutdown;
mod tables;

use std::{
    io::IsTerminal,
    net::SocketAddr,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use triage::{
    aws::{eventbridge, lambda::config_from_env},
    config::Config,
    db, operations,
    pipeline::{
        delivery,
        sweep::Sweeper,
        worker::{self, Worker},
    },
    providers::AnyProvider,
    secret::{ExposeSecret, Secret},
    telemetry,
};

use crate::serve::{ConsoleAccess, Listening};

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
        /// An admin to authenticate as with the account's API token: the incremental export is
        /// for admins only (default: TRIAGE_ZENDESK_EMAIL, the connector's agent).
        #[arg(long)]
        email: Option<String>,
    },
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
            let listening = Listening::open(listen, &console).await?;
            listening
                .serve(Arc::new(config_from_env().await?), stop)
                .await?
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
                    email,
                },
        } => {
            let config = config_from_env().await?;
            let pool = db::pool(&config.database)?;
            let run = operations::import::ImportZendesk {
                since: since.0,
                out,
                policy_version: taxonomy.unwrap_or_else(|| config.versions.policy.to_string()),
                requests_per_minute: operations::import::EXPORT_RPM,
                email,
            };
            let imported =
                operations::import::zendesk(&pool, &config.zendesk, config.delivery.timeout, &run)
                    .await?;
            println!("{}", serde_json::to_string(&imported)?);
        }
        Command::Operation(request) => operate(request, cli.json, stop).await?,
        Command::Dev { listen, console } => {
            let listening = Listening::open(listen, &console).await?;
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
                // A server that fails stops the loops beside it, or the run would go on
                // without its API.
                async {
                    let served = listening.serve(config.clone(), stop.clone()).await;
                    stop.cancel();
                    served
                },
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
