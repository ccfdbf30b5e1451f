//! HTTPS for the local server off loopback, where bearer tokens, the console's session cookie
//! and ticket text would otherwise cross the network in clear. Each handshake runs in a task
//! of its own, so a client that connects and says nothing holds up no one else.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    ServerConfig,
};
use tokio::{
    net::{TcpListener, TcpStream},
    task::JoinSet,
    time::timeout,
};
use tokio_rustls::{server::TlsStream, TlsAcceptor};

use crate::tls;

/// Long enough for a slow network, short enough that silent connections do not pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The PEM files `triage serve` answers TLS with: a certificate chain (leaf first) and the
/// leaf's private key.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why the certificate and key cannot serve TLS; each names the file at fault, and its cause
/// (in the message, so it is said once).
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("cannot read {}: {cause}", path.display())]
    Unreadable {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{} holds no PEM certificate", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{} holds no PEM private key", path.display())]
    NoKey { path: PathBuf },
    #[error("{} is not valid PEM: {cause}", path.display())]
    NotPem {
        path: PathBuf,
        cause: rustls::pki_types::pem::Error,
    },
    #[error(
        "the certificate in {} and the key in {} cannot serve TLS: {cause}",
        cert.display(),
        key.display()
    )]
    Refused {
        cert: PathBuf,
        key: PathBuf,
        cause: rustls::Error,
    },
}

impl TlsFiles {
    /// Reads and checks both files (the key must be the certificate's).
    pub fn load(&self) -> Result<Arc<ServerConfig>, TlsSetupError> {
        let chain = CertificateDer::pem_slice_iter(&read(&self.cert)?)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|cause| not_pem(&self.cert, cause))?;
        if chain.is_empty() {
            return Err(TlsSetupError::NoCertificate {
                path: self.cert.clone(),
            });
        }
        let key =
            PrivateKeyDer::from_pem_slice(&read(&self.key)?).map_err(|error| match error {
                rustls::pki_types::pem::Error::NoItemsFound => TlsSetupError::NoKey {
                    path: self.key.clone(),
                },
                cause => not_pem(&self.key, cause),
            })?;
        let config = tls::server_config(chain, key).map_err(|cause| TlsSetupError::Refused {
            cert: self.cert.clone(),
            key: self.key.clone(),
            cause,
        })?;
        Ok(Arc::new(config))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsSetupError> {
    std::fs::read(path).map_err(|cause| TlsSetupError::Unreadable {
        path: path.to_owned(),
        cause,
    })
}

fn not_pem(path: &Path, cause: rustls::pki_types::pem::Error) -> TlsSetupError {
    TlsSetupError::NotPem {
        path: path.to_owned(),
        cause,
    }
}

/// Handshakes under way at once, at most: an operator's console and API see a handful.
const MAX_HANDSHAKES: usize = 256;

/// A TCP listener whose connections are handed on only once their TLS handshake is done.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    /// Handshakes under way; dropped with the listener, which ends them.
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> Self {
        Self {
            tcp,
            acceptor: TlsAcceptor::from(config),
            handshakes: JoinSet::new(),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                // axum's own accept: it logs and retries errors (out of file descriptors). At
                // the cap, new connections wait in the kernel's backlog until a handshake ends:
                // silent clients cost a bounded number of tasks, not one each.
                (tcp, peer) = axum::serve::Listener::accept(&mut self.tcp),
                    if self.handshakes.len() < MAX_HANDSHAKES => {
                    self.handshakes.spawn(handshake(self.acceptor.clone(), tcp, peer));
                }
                Some(finished) = self.handshakes.join_next() => match finished {
                    Ok(Some(connection)) => return connection,
                    Ok(None) => {}
                    Err(error) => tracing::warn!(%error, "a TLS handshake task failed"),
                },
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// The handshake with `peer`, or `None` (logged at debug: scanners and plain-HTTP clients are
/// routine on an open port, and each says so once).
async fn handshake(
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
) -> Option<(TlsStream<TcpStream>, SocketAddr)> {
    match timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => Some((stream, peer)),
        Ok(Err(error)) => {
            tracing::debug!(%peer, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}
