//! `triage`: the whole pipeline from one binary, configured by SPEC's environment names.

mod local_postgres;
mod tables;

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use triage::{
    config::{Config, Secret},
    db,
    evaluate::AnyProvider,
    http::{self, admin},
    ops::{self, HumanDuration, Since, VersionSpec},
    shutdown, sweep, telemetry,
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
    /// Serve the HTTP API, and the operator console at /admin (loopback only by default).
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
        #[arg(long, default_value = "1d")]
        since: HumanDuration,
        #[arg(long)]
        json: bool,
    },
    /// Queue tickets again under a new prompt/model version (new keys; old results stay).
    Reprocess {
        /// Tickets created since: an RFC 3339 time or a duration back from now (2h, 30d).
        #[arg(long)]
        since: Since,
        #[arg(long)]
        prompt_version: String,
        /// model@effort; default: the configured model version.
        #[arg(long)]
        model_version: Option<String>,
        #[command(flatten)]
        pacing: Pacing,
        #[arg(long)]
        json: bool,
    },
    /// Compare two versions on the tickets evaluated under both.
    ShadowDiff {
        /// prompt or prompt/model, e.g. triage-v3/gpt-6-luna@medium.
        #[arg(long)]
        from: VersionSpec,
        #[arg(long)]
        to: VersionSpec,
        #[arg(long)]
        json: bool,
    },
    /// Make GET /tickets/{id} show this version (recorded in the database).
    Promote {
        #[arg(long)]
        prompt_version: String,
        /// model@effort; default: the configured model version.
        #[arg(long)]
        model_version: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Move dead letters back to the queue with attempts reset.
    Redrive {
        /// Only this reason, as `triage dead-letters` groups them.
        #[arg(long)]
        reason: Option<String>,
        /// Only jobs that died within this long, e.g. 2h.
        #[arg(long)]
        since: Option<HumanDuration>,
        /// At most this many jobs.
        #[arg(long)]
        limit: Option<i64>,
        #[command(flatten)]
        pacing: Pacing,
        #[arg(long)]
        json: bool,
    },
    /// Everything locally: a throwaway PostgreSQL when DATABASE_URL is unset, migrations,
    /// the API, and worker and sweeper on a short schedule.
    Dev {
        #[arg(long, default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
        #[command(flatten)]
        console: ConsoleAccess,
    },
}

/// Who may reach the console (docs/console.md). The token is read from TRIAGE_ADMIN_TOKEN
/// only, never from a flag, so it does not show in the process list.
#[derive(Args)]
struct ConsoleAccess {
    /// Also serve /admin when --listen is not a loopback address; requires TRIAGE_ADMIN_TOKEN
    /// (at least 24 characters). Without it, such a server has the API only.
    #[arg(long)]
    allow_remote_admin: bool,
}

/// How reprocess and redrive put work back in the queue.
#[derive(Args)]
struct Pacing {
    /// Jobs become claimable at random within this window (default 30m), so the provider is
    /// not hit at once.
    #[arg(long)]
    spread: Option<HumanDuration>,
    /// Count what would change; write nothing.
    #[arg(long)]
    dry_run: bool,
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
            let config = Config::load().await?;
            let applied = db::migrate(&config.database).await?;
            println!("migrations applied: {applied}");
        }
        Command::Serve { listen, console } => {
            serve(Arc::new(Config::load().await?), listen, &console, stop).await?
        }
        Command::Worker { once } => {
            let config = Arc::new(Config::load().await?);
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
            let config = Config::load().await?;
            let pool = db::pool(&config.database)?;
            if once {
                let report = sweep::sweep(&pool, &config).await?;
                println!("{}", serde_json::to_string(&report)?);
            } else {
                sweep_until_stopped(&pool, &config, stop).await;
            }
        }
        Command::Stats { json } => operate(ops::Request::Stats, json).await?,
        Command::DeadLetters { since, json } => {
            operate(ops::Request::DeadLetters { since: Some(since) }, json).await?
        }
        Command::Reprocess {
            since,
            prompt_version,
            model_version,
            pacing,
            json,
        } => {
            let request = ops::Request::Reprocess {
                since,
                prompt_version,
                model_version,
                spread: pacing.spread,
                dry_run: pacing.dry_run,
            };
            operate(request, json).await?
        }
        Command::ShadowDiff { from, to, json } => {
            operate(ops::Request::ShadowDiff { from, to }, json).await?
        }
        Command::Promote {
            prompt_version,
            model_version,
            json,
        } => {
            let request = ops::Request::Promote {
                prompt_version,
                model_version,
            };
            operate(request, json).await?
        }
        Command::Redrive {
            reason,
            since,
            limit,
            pacing,
            json,
        } => {
            let request = ops::Request::Redrive {
                reason,
                since,
                limit,
                spread: pacing.spread,
                dry_run: pacing.dry_run,
            };
            operate(request, json).await?
        }
        Command::Dev { listen, console } => {
            let mut config = Config::load().await?;
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
                serve(config.clone(), listen, &console, stop.clone()),
                worker::run_until_stopped(&worker, WORKER_IDLE, stop.clone()),
                sweep_until_stopped(&pool, &config, stop.clone()),
            );
            served?;
            worked?;
        }
    }
    Ok(())
}

/// The operations run here exactly as in the ops Lambda; only the printing differs.
async fn operate(request: ops::Request, json: bool) -> anyhow::Result<()> {
    let config = Config::load().await?;
    let outcome = ops::run(&db::pool(&config.database)?, &config, request).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        print!("{}", tables::outcome(&outcome));
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
    access: &ConsoleAccess,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let token = std::env::var(admin::security::TOKEN_ENV)
        .ok()
        .map(Secret::new);
    let console = match admin::Exposure::decide(listen, access.allow_remote_admin, token)
        .map_err(anyhow::Error::msg)?
    {
        admin::Exposure::Served { token } => {
            let signed = if token.is_some() {
                " (token required)"
            } else {
                ""
            };
            eprintln!("triage: operator console at http://{listen}/admin{signed}");
            Some(admin::Guard::new(token))
        }
        admin::Exposure::NotServed { why } => {
            eprintln!("triage: {why}");
            None
        }
    };
    let pool = db::pool(&config.database)?;
    let state = http::AppState { pool, config };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    eprintln!("triage: API listening on http://{listen}");
    http::serve(
        listener,
        state,
        console,
        async move { stop.cancelled().await },
    )
    .await?;
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
