//! TLS for every outbound connection: rustls on ring, one stack for the database, the model
//! provider and Secrets Manager. Here trust is explicit: the database trusts the RDS CAs
//! embedded in the binary (`certs/rds-ca-bundle.pem`), HTTPS clients the Mozilla roots compiled
//! into `webpki-roots`. Neither reads the file system, so building one costs milliseconds at
//! cold start, not OpenSSL's ~200 ms. (The Secrets Manager client keeps the SDK's default: the
//! image's CA store, loaded on its first request.) The same stack answers the local server's
//! HTTPS off loopback ([`server_config`]).

use std::{borrow::Cow, fmt, sync::Arc};

use rustls::{
    crypto::{ring, CryptoProvider},
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    ClientConfig, RootCertStore, ServerConfig,
};

/// Whether `url`'s host is this machine (`localhost`, 127.0.0.0/8, ::1): the only place
/// plain http may go, since nothing sent there leaves the host (the fakes in tests).
pub fn is_loopback(url: &reqwest::Url) -> bool {
    match url.host_str() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// Refuses a URL a credential (an API key or token) would travel to in clear: https, or
/// plain http only to loopback. The reason follows the variable's name in errors.
pub fn refuse_in_clear(url: &reqwest::Url) -> Result<(), &'static str> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) => Ok(()),
        _ => Err("must be https (plain http only to a loopback address): credentials would travel in clear"),
    }
}

fn ring_provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// A client configuration trusting exactly `roots` (TLS 1.2 and 1.3, rustls' safe defaults).
fn client_config(roots: RootCertStore) -> ClientConfig {
    ClientConfig::builder_with_provider(ring_provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A server configuration answering with `chain` (leaf first) and its `key`, on the same
/// protocol versions; refused when the key is not the leaf's.
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, rustls::Error> {
    ServerConfig::builder_with_provider(ring_provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
}

/// Trusting the PEM certificates of `roots`; an unreadable certificate is an error, not a
/// silently smaller trust store.
pub fn database_config(roots: &CaRoots) -> Result<ClientConfig, String> {
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&roots.0) {
        let cert = cert.map_err(|e| format!("CA bundle: {e}"))?;
        store
            .add(cert)
            .map_err(|e| format!("CA bundle: certificate not usable as a root: {e}"))?;
    }
    if store.is_empty() {
        return Err("CA bundle: no certificates".into());
    }
    Ok(client_config(store))
}

/// An HTTPS client builder trusting the public web PKI (the model providers, the custom
/// resource's S3 ResponseURL).
pub fn https_client_builder() -> reqwest::ClientBuilder {
    let roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    reqwest::Client::builder().tls_backend_preconfigured(client_config(roots))
}

/// PEM certificates trusted for the database: the RDS and RDS Proxy CAs embedded from
/// `certs/rds-ca-bundle.pem` (refreshed by `scripts/refresh-rds-ca`), or a test's own CA.
#[derive(Clone, PartialEq, Eq)]
pub struct CaRoots(pub Cow<'static, [u8]>);

impl CaRoots {
    pub const RDS: CaRoots = CaRoots(Cow::Borrowed(include_bytes!(
        "../../certs/rds-ca-bundle.pem"
    )));
}

impl fmt::Debug for CaRoots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::RDS {
            f.write_str("CaRoots(rds-ca-bundle.pem)")
        } else {
            write!(f, "CaRoots({} bytes)", self.0.len())
        }
    }
}
