//! What guards the local server (`triage serve`, `triage dev`), which has no API Gateway in
//! front: the API and the console are each served on loopback by default, and elsewhere only
//! when asked *and* with a bearer token ([`Door::decide`], the same rules for both) *and* over
//! TLS ([`require_tls_off_loopback`]); on a loopback listener, every request must be addressed to loopback ([`host_is_loopback`]), so a
//! page that re-points its own name at 127.0.0.1 (DNS rebinding) reaches nothing.

use std::net::SocketAddr;

use axum::{
    extract::{Request, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    Router,
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Problem;
use crate::secret::{ExposeSecret, Secret};

/// A shorter token is refused: it would be guessable over a network.
pub const MIN_TOKEN_LEN: usize = 24;

/// One part of the local server that can be exposed beyond loopback, and how it is asked for.
#[derive(Debug, Clone, Copy)]
pub struct Door {
    pub what: &'static str,
    pub flag: &'static str,
    /// The environment variable the token is read from (never a flag: no process-list leak).
    pub token_env: &'static str,
}

pub const API: Door = Door {
    what: "the API (/tickets)",
    flag: "--allow-remote-api",
    token_env: "TRIAGE_API_TOKEN",
};

pub const CONSOLE: Door = Door {
    what: "/admin",
    flag: "--allow-remote-admin",
    token_env: "TRIAGE_ADMIN_TOKEN",
};

/// Whether `triage serve` serves a door, decided before anything binds.
#[derive(Debug)]
pub enum Exposure {
    /// Served; `token` (when set) is required even on loopback.
    Served { token: Option<Secret> },
    /// Not served: a non-loopback address without the door's flag.
    NotServed { why: String },
}

impl Door {
    /// Loopback: served (with the token when one is set). Elsewhere: only with `allow_remote`
    /// and a token of at least [`MIN_TOKEN_LEN`] characters; `allow_remote` without one is a
    /// configuration error, so an operator who asked for remote access never gets it unguarded.
    pub fn decide(
        &self,
        listen: SocketAddr,
        allow_remote: bool,
        token: Option<Secret>,
    ) -> Result<Exposure, String> {
        let Door {
            what,
            flag,
            token_env,
        } = self;
        let token = token.filter(|t| !t.expose_secret().is_empty());
        if token
            .as_ref()
            .is_some_and(|t| t.expose_secret().len() < MIN_TOKEN_LEN)
        {
            return Err(format!(
                "{token_env} must be at least {MIN_TOKEN_LEN} characters"
            ));
        }
        if listen.ip().is_loopback() {
            return Ok(Exposure::Served { token });
        }
        match (allow_remote, token) {
            (true, Some(token)) => Ok(Exposure::Served { token: Some(token) }),
            (true, None) => Err(format!("{flag} on {listen} needs a token in {token_env}")),
            (false, _) => Ok(Exposure::NotServed {
                why: format!(
                    "{what} is not served on {listen}: only loopback by default \
                     ({flag} with {token_env} to serve it here)"
                ),
            }),
        }
    }
}

/// Off loopback, what the local server carries (bearer tokens, the console's session cookie,
/// ticket text) must not cross the network in clear: such a listener serves TLS or nothing.
pub fn require_tls_off_loopback(listen: SocketAddr, tls: bool) -> Result<(), String> {
    if tls || listen.ip().is_loopback() {
        return Ok(());
    }
    Err(format!(
        "{listen} is not a loopback address: {} and {} serve only over TLS; give --tls-cert \
         and --tls-key (PEM files; or TRIAGE_TLS_CERT and TRIAGE_TLS_KEY)",
        API.flag, CONSOLE.flag
    ))
}

/// A bearer token, kept as its SHA-256 digest and compared with `subtle`, so the comparison
/// takes the same time whatever the guess and whatever its length.
#[derive(Clone)]
pub struct Token([u8; 32]);

impl Token {
    pub fn new(token: &Secret) -> Self {
        Self(Sha256::digest(token.expose_secret().as_bytes()).into())
    }

    pub fn matches(&self, candidate: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(candidate.as_bytes()).into();
        digest.ct_eq(&self.0).into()
    }

    /// Whether the request carries `Authorization: Bearer <this token>`.
    pub fn presented_in(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| self.matches(t.trim()))
    }
}

/// Whether the request names this machine's loopback as its host (`127.0.0.1:3000`,
/// `[::1]:3000`, `localhost:3000`).
pub fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _port)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Middleware for every route of a loopback listener: the request must be addressed to
/// loopback.
pub async fn require_loopback_host(request: Request, next: Next) -> Response {
    if host_is_loopback(request.headers()) {
        next.run(request).await
    } else {
        Problem::new(
            StatusCode::FORBIDDEN,
            "this server answers requests addressed to 127.0.0.1 or localhost only",
        )
        .into_response()
    }
}

/// The local server's API: open on loopback without a token, else behind its bearer token.
pub struct ApiGuard {
    token: Option<Token>,
}

impl ApiGuard {
    /// From the API door's [`Exposure::Served`] token.
    pub fn new(token: Option<Secret>) -> Self {
        Self {
            token: token.as_ref().map(Token::new),
        }
    }

    pub fn requires_token(&self) -> bool {
        self.token.is_some()
    }

    /// `routes` behind the token, when there is one.
    pub fn protect<S: Clone + Send + Sync + 'static>(self, routes: Router<S>) -> Router<S> {
        match self.token {
            None => routes,
            Some(token) => {
                routes.route_layer(middleware::from_fn_with_state(token, require_api_token))
            }
        }
    }
}

/// Middleware for the API's routes when `TRIAGE_API_TOKEN` is set: the bearer token or a 401.
async fn require_api_token(State(token): State<Token>, request: Request, next: Next) -> Response {
    if token.presented_in(request.headers()) {
        return next.run(request).await;
    }
    let mut response = Problem::new(
        StatusCode::UNAUTHORIZED,
        format!(
            "this server's API needs `Authorization: Bearer` with {}",
            API.token_env
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn each_door_is_served_on_loopback_and_elsewhere_only_when_asked_with_a_token() {
        let loopback: SocketAddr = "127.0.0.1:3000".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:3000".parse().unwrap();
        let token = || Some(Secret::from(TOKEN));
        for door in [API, CONSOLE] {
            assert!(matches!(
                door.decide(loopback, false, None),
                Ok(Exposure::Served { token: None })
            ));
            assert!(matches!(
                door.decide(any, false, token()),
                Ok(Exposure::NotServed { .. })
            ));
            assert!(matches!(
                door.decide(any, false, None),
                Ok(Exposure::NotServed { .. })
            ));
            let refused = door.decide(any, true, None).unwrap_err();
            assert!(refused.contains(door.token_env), "{refused}");
            assert!(door.decide(any, true, Some(Secret::from("short"))).is_err());
            assert!(matches!(
                door.decide(any, true, token()),
                Ok(Exposure::Served { token: Some(_) })
            ));
        }
    }

    #[test]
    fn off_loopback_the_server_needs_tls() {
        let loopback: SocketAddr = "[::1]:3000".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:3000".parse().unwrap();
        assert!(require_tls_off_loopback(loopback, false).is_ok());
        assert!(require_tls_off_loopback(any, true).is_ok());
        let refused = require_tls_off_loopback(any, false).unwrap_err();
        assert!(refused.contains("--tls-cert"), "{refused}");
    }

    #[test]
    fn only_loopback_host_names_count_as_loopback() {
        let headers = |host: &str| {
            let mut map = HeaderMap::new();
            map.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            map
        };
        for (host, loopback) in [
            ("127.0.0.1:3000", true),
            ("127.0.0.1", true),
            ("[::1]:3000", true),
            ("localhost:8080", true),
            ("LOCALHOST", true),
            ("attacker.example:3000", false),
            ("10.0.0.5:3000", false),
            ("127.0.0.1.attacker.example", false),
        ] {
            assert_eq!(host_is_loopback(&headers(host)), loopback, "{host}");
        }
        assert!(!host_is_loopback(&HeaderMap::new()));
    }

    #[test]
    fn a_token_matches_itself_only() {
        let token = Token::new(&Secret::from(TOKEN));
        assert!(token.matches(TOKEN));
        assert!(!token.matches("wrong"));
        assert!(!token.matches(""));
    }
}
