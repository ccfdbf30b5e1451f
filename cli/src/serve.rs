//! The local server (`triage serve`, `triage dev`): who may reach it, and its socket, bound
//! before anything slow starts so that a taken port ends the run at once.

use std::{io, net::SocketAddr, path::PathBuf, sync::Arc};

use clap::Args;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use triage::{
    config::Config,
    db,
    http::{self, admin, loopback},
    secret::Secret,
};

/// Who may reach the local server beyond loopback, and over what (docs/console.md,
/// docs/runbook.md "Security"). Tokens are read from TRIAGE_ADMIN_TOKEN and TRIAGE_API_TOKEN
/// only, never from a flag, so they do not show in the process list.
#[derive(Args)]
pub(crate) struct ConsoleAccess {
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

/// The server's door, decided and bound, not yet answering.
pub(crate) struct Listening {
    socket: Socket,
    bound: SocketAddr,
    server: http::LocalServer,
    /// Each door's token, when it asks for one, for what the start-up line says.
    signed: (Option<bool>, Option<bool>),
}

enum Socket {
    Plain(TcpListener),
    Tls(http::TlsListener),
}

impl Listening {
    /// Decides what `listen` serves from `access` and binds it. Runs before a throwaway
    /// PostgreSQL or the migrations: a second `triage dev` on the same port fails here, in
    /// milliseconds, instead of after them (or never, beside workers that run until stopped).
    pub(crate) async fn open(listen: SocketAddr, access: &ConsoleAccess) -> anyhow::Result<Self> {
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
        loopback::require_tls_off_loopback(listen, tls_files.is_some())
            .map_err(anyhow::Error::msg)?;
        let tls = tls_files.as_ref().map(http::TlsFiles::load).transpose()?;
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|error| bind_failed(listen, error))?;
        // The bound address, not the asked one: with port 0 the tests learn the port from it.
        let bound = listener.local_addr()?;
        let signed = (
            api.as_ref().map(Option::is_some),
            console.as_ref().map(Option::is_some),
        );
        Ok(Self {
            socket: match tls {
                None => Socket::Plain(listener),
                Some(tls) => Socket::Tls(http::TlsListener::new(listener, tls)),
            },
            bound,
            server: http::LocalServer {
                api: api.map(loopback::ApiGuard::new),
                console: console.map(admin::Guard::new),
            },
            signed,
        })
    }

    /// Answers until `stop`.
    pub(crate) async fn serve(
        self,
        config: Arc<Config>,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        let scheme = match self.socket {
            Socket::Plain(_) => "http",
            Socket::Tls(_) => "https",
        };
        let bound = self.bound;
        let signed = |token: bool| if token { " (token required)" } else { "" };
        if let Some(token) = self.signed.0 {
            eprintln!(
                "triage: API listening on {scheme}://{bound}{}",
                signed(token)
            );
        }
        if let Some(token) = self.signed.1 {
            eprintln!(
                "triage: operator console at {scheme}://{bound}/admin{}",
                signed(token)
            );
        }
        let pool = db::pool(&config.database)?;
        let state = http::AppState::new(pool, config);
        let shutdown = async move { stop.cancelled().await };
        match self.socket {
            Socket::Plain(listener) => http::serve(listener, state, self.server, shutdown).await?,
            Socket::Tls(listener) => {
                http::serve_tls(listener, state, self.server, shutdown).await?
            }
        }
        Ok(())
    }
}

/// What a bind that failed says: the port, and the flag that picks another.
fn bind_failed(listen: SocketAddr, error: io::Error) -> anyhow::Error {
    let why = match error.kind() {
        io::ErrorKind::AddrInUse => format!(
            "port {} is already in use (another triage dev or serve?)",
            listen.port()
        ),
        _ => format!("port {}: {error}", listen.port()),
    };
    anyhow::anyhow!("cannot listen on {listen}: {why}; choose another with --listen ADDRESS:PORT")
}
