//! `triage`: the whole pipeline from one binary, configured by SPEC's environment names.

mod local_postgres;

use std::{net::SocketAddr, sync::Arc};

use anyhow::Context;
use clap::{Parser, Subcommand};
use triage::{config::Config, db, http, shutdown, telemetry};

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
    /// Everything locally: a throwaway PostgreSQL when DATABASE_URL is unset, migrations, the API.
    Dev {
        #[arg(long, default_value = "127.0.0.1:3000")]
        listen: SocketAddr,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init();
    let cli = Cli::parse();
    match cli.command {
        Command::Migrate => {
            let config = Config::from_env()?;
            let applied = db::migrate(&config.database).await?;
            println!("migrations applied: {applied}");
        }
        Command::Serve { listen } => serve(Config::from_env()?, listen).await?,
        Command::Dev { listen } => {
            let mut config = Config::from_env()?;
            let _local = if config.database.url.is_empty() {
                let pg = local_postgres::LocalPostgres::start()?;
                config.database.url = triage::config::Secret::new(pg.url.clone());
                eprintln!("triage dev: throwaway PostgreSQL at {}", pg.url);
                Some(pg)
            } else {
                None
            };
            db::migrate(&config.database).await?;
            serve(config, listen).await?;
        }
    }
    Ok(())
}

async fn serve(config: Config, listen: SocketAddr) -> anyhow::Result<()> {
    let pool = db::pool(&config.database)?;
    let state = http::AppState {
        pool,
        config: Arc::new(config),
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    eprintln!("triage: API listening on http://{listen}");
    http::serve(listener, state, shutdown::signal()).await?;
    Ok(())
}
