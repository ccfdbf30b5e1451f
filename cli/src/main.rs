//! `triage`: the whole pipeline from one binary, configured by SPEC's environment names.

mod local_postgres;
mod tables;

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use triage::{
    config::{Config, Secret},
    db,
    evaluate::AnyProvider,
    http, report, shutdown, sweep, telemetry,
    worker::{self, Worker},
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
}

#[derive(Subcommand)]
enum Command {
    /// Apply migrations/ (idempotent, safe to run concurrently).
    Migrate,
    /// Serve the HTTP API only.
    Serve {
        #[arg(long, default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
    },
    /// Evaluate pending tickets: one invocation with --once, else until SIGTERM/SIGINT.
    Worker {
        #[arg(long)]
        once: bool,
    },
    /// Return expired leases: one pass with --once, else until SIGTERM/SIGINT.
    Sweeper {
        #[arg(long)]
        once: bool,
    },
    /// Queue health: depth, oldest claimable age, dedup, billed calls and spend.
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Dead letters grouped by reason.
    DeadLetters {
        /// How far back, e.g. 90s, 30m, 2h, 1d.
        #[arg(long, default_value = "1d", value_parser = humantime::parse_duration)]
        since: Duration,
        #[arg(long)]
        json: bool,
    },
    /// Everything locally: a throwaway PostgreSQL when DATABASE_URL is unset, migrations,
    /// the API, and worker and sweeper on a short schedule.
    Dev {
        #[arg(long, default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
    },
}

/// How often the long-running worker and sweeper look again when idle.
const WORKER_IDLE: Duration = Duration::from_secs(1);
const SWEEP_EVERY: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init();
    let cli = Cli::parse();
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
            let config = Config::from_env()?;
            let applied = db::migrate(&config.database).await?;
            println!("migrations applied: {applied}");
        }
        Command::Serve { listen } => serve(Arc::new(Config::from_env()?), listen, stop).await?,
        Command::Worker { once } => {
            let config = Arc::new(Config::from_env()?);
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
            let config = Config::from_env()?;
            let pool = db::pool(&config.database)?;
            if once {
                let report = sweep::sweep(&pool, &config).await?;
                println!("{}", serde_json::to_string(&report)?);
            } else {
                sweep_until_stopped(&pool, &config, stop).await;
            }
        }
        Command::Stats { json } => {
            let config = Config::from_env()?;
            let health = report::health(&db::pool(&config.database)?).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&health)?);
            } else {
                print!("{}", tables::health(&health));
            }
        }
        Command::DeadLetters { since, json } => {
            let config = Config::from_env()?;
            let groups = report::dead_letters(&db::pool(&config.database)?, since).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&groups)?);
            } else {
                print!("{}", tables::dead_letters(&groups));
            }
        }
        Command::Dev { listen } => {
            let mut config = Config::from_env()?;
            let _local = if config.database.url.is_empty() {
                let pg = local_postgres::LocalPostgres::start()?;
                config.database.url = Secret::new(pg.url.clone());
                eprintln!("triage dev: throwaway PostgreSQL at {}", pg.url);
                Some(pg)
            } else {
                None
            };
            db::migrate(&config.database).await?;
            let config = Arc::new(config);
            let worker = build_worker(&config)?;
            let pool = db::pool(&config.database)?;
            let (served, worked, ()) = tokio::join!(
                serve(config.clone(), listen, stop.clone()),
                worker::run_until_stopped(&worker, WORKER_IDLE, stop.clone()),
                sweep_until_stopped(&pool, &config, stop.clone()),
            );
            served?;
            worked?;
        }
    }
    Ok(())
}

fn build_worker(config: &Arc<Config>) -> anyhow::Result<Worker<AnyProvider>> {
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
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let pool = db::pool(&config.database)?;
    let state = http::AppState { pool, config };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    eprintln!("triage: API listening on http://{listen}");
    http::serve(listener, state, async move { stop.cancelled().await }).await?;
    Ok(())
}

async fn sweep_until_stopped(
    pool: &deadpool_postgres::Pool,
    config: &Config,
    stop: CancellationToken,
) {
    while !stop.is_cancelled() {
        if let Err(error) = sweep::sweep(pool, config).await {
            tracing::warn!(%error, "sweep failed; retrying");
        }
        tokio::select! { _ = stop.cancelled() => {}, _ = tokio::time::sleep(SWEEP_EVERY) => {} }
    }
}
