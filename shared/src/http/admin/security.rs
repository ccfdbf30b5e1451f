//! Who may use the console and how its forms are protected.
//!
//! - Exposure: the console is served on loopback by default; any other address needs an
//!   explicit opt-in *and* a token ([`Exposure::decide`]).
//! - Sign-in: `Authorization: Bearer <token>` (scripts) or a session cookie set by the login
//!   form. Both are compared through SHA-256 digests with `subtle`, so the comparison takes the
//!   same time whatever the guess and whatever its length.
//! - Cross-site requests: every POST must carry a CSRF token that is an HMAC of the browser's
//!   own `triage_csrf` cookie under a per-process key, and must not come from another site
//!   (`Sec-Fetch-Site`, `Origin`).

use std::net::SocketAddr;

use axum::http::{header, HeaderMap, HeaderValue};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::secret::{ExposeSecret, Secret};

pub const SESSION_COOKIE: &str = "triage_admin";
pub const CSRF_COOKIE: &str = "triage_csrf";
/// The environment variable the CLI reads the token from.
pub const TOKEN_ENV: &str = "TRIAGE_ADMIN_TOKEN";
/// A shorter token is refused: it would be guessable over a network.
pub const MIN_TOKEN_LEN: usize = 24;

/// Whether `triage serve` mounts the console, decided before anything binds.
#[derive(Debug)]
pub enum Exposure {
    /// Served; `token` (when set) is required even on loopback.
    Served { token: Option<Secret> },
    /// Not served: a non-loopback address without `--allow-remote-admin`. The API still is.
    NotServed { why: String },
}

impl Exposure {
    /// Loopback: served (with the token when one is set). Elsewhere: only with `allow_remote`
    /// and a token of at least [`MIN_TOKEN_LEN`] characters; `allow_remote` without one is a
    /// configuration error, so an operator who asked for remote access never gets it unguarded.
    pub fn decide(
        listen: SocketAddr,
        allow_remote: bool,
        token: Option<Secret>,
    ) -> Result<Self, String> {
        let token = token.filter(|t| !t.expose_secret().is_empty());
        if let Some(t) = &token {
            if t.expose_secret().len() < MIN_TOKEN_LEN {
                return Err(format!(
                    "{TOKEN_ENV} must be at least {MIN_TOKEN_LEN} characters"
                ));
            }
        }
        if listen.ip().is_loopback() {
            return Ok(Exposure::Served { token });
        }
        match (allow_remote, token) {
            (true, Some(token)) => Ok(Exposure::Served { token: Some(token) }),
            (true, None) => Err(format!(
                "--allow-remote-admin on {listen} needs a token in {TOKEN_ENV}"
            )),
            (false, _) => Ok(Exposure::NotServed {
                why: format!(
                    "/admin is not served on {listen}: only loopback by default \
                     (--allow-remote-admin with {TOKEN_ENV} to serve it here)"
                ),
            }),
        }
    }
}

/// The console's secrets for one process: the operator token and a random key for session
/// and CSRF tokens (so a restart signs everyone out, which is fine for an operator tool).
pub struct Guard {
    token_digest: Option<[u8; 32]>,
    key: [u8; 32],
}

type HmacSha256 = Hmac<Sha256>;

impl Guard {
    pub fn new(token: Option<Secret>) -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source is available");
        Self {
            token_digest: token.map(|t| Sha256::digest(t.expose_secret().as_bytes()).into()),
            key,
        }
    }

    pub fn requires_token(&self) -> bool {
        self.token_digest.is_some()
    }

    fn sign(&self, purpose: &str, value: &str) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("any key length");
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(value.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `candidate` is the operator token.
    pub fn token_matches(&self, candidate: &str) -> bool {
        let Some(expected) = &self.token_digest else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(candidate.as_bytes()).into();
        digest.ct_eq(expected).into()
    }

    /// The session cookie's value after a successful login.
    pub fn session_value(&self) -> String {
        self.sign("session", "operator")
    }

    /// Signed in: no token configured, a matching bearer token, or the session cookie.
    pub fn is_signed_in(&self, headers: &HeaderMap) -> bool {
        if !self.requires_token() {
            return true;
        }
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if bearer.is_some_and(|t| self.token_matches(t.trim())) {
            return true;
        }
        cookie(headers, SESSION_COOKIE).is_some_and(|v| equal(v, &self.session_value()))
    }

    /// The CSRF token for forms on this page, and the cookie to set when the browser has none.
    pub fn csrf(&self, headers: &HeaderMap) -> (String, Option<HeaderValue>) {
        if let Some(existing) = cookie(headers, CSRF_COOKIE).filter(|v| v.len() == 32) {
            return (self.sign("csrf", existing), None);
        }
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).expect("the OS random source is available");
        let nonce = hex::encode(nonce);
        (
            self.sign("csrf", &nonce),
            Some(cookie_header(CSRF_COOKIE, &nonce)),
        )
    }

    /// Checks a form POST: same-origin by the browser's own headers, and the CSRF token tied to
    /// this browser's cookie. The error says which check failed (never the expected value).
    pub fn check_post(&self, headers: &HeaderMap, form_token: &str) -> Result<(), &'static str> {
        same_origin(headers)?;
        let nonce = cookie(headers, CSRF_COOKIE)
            .ok_or("the console's CSRF cookie is missing; reload the page and submit again")?;
        if equal(form_token, &self.sign("csrf", nonce)) {
            Ok(())
        } else {
            Err("the form's CSRF token does not match this browser's session; reload the page and submit again")
        }
    }
}

/// `Sec-Fetch-Site` (sent by every current browser) must say same-origin; `Origin`, when
/// present, must name the host the request was sent to. Clients that send neither (curl with
/// a bearer token) still need the CSRF token.
fn same_origin(headers: &HeaderMap) -> Result<(), &'static str> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(site) = text("sec-fetch-site") {
        if site != "same-origin" {
            return Err("cross-site request refused (Sec-Fetch-Site)");
        }
    }
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let host = text(header::HOST.as_str()).unwrap_or("");
        let matches = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|o| o == host);
        if !matches {
            return Err("cross-site request refused (Origin does not match Host)");
        }
    }
    Ok(())
}

/// Whether the request names this machine's loopback as its host (`127.0.0.1:3000`,
/// `[::1]:3000`, `localhost:3000`). Without a token the console trusts loopback; a page from
/// another site that re-points its own name at 127.0.0.1 (DNS rebinding) would send its own
/// name here, and is refused.
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

fn equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The value of cookie `name` in the request.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Not readable by scripts, never sent by another site, only to the console's paths. Not
/// `Secure`: the console is reached over plain HTTP on loopback (an SSM tunnel).
pub fn cookie_header(name: &str, value: &str) -> HeaderValue {
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/admin; HttpOnly; SameSite=Strict"
    ))
    .expect("hex cookie values are valid header text")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn the_console_is_served_on_loopback_and_elsewhere_only_when_asked_with_a_token() {
        let loopback: SocketAddr = "127.0.0.1:3000".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:3000".parse().unwrap();
        let token = || Some(Secret::from(TOKEN));
        assert!(matches!(
            Exposure::decide(loopback, false, None),
            Ok(Exposure::Served { token: None })
        ));
        assert!(matches!(
            Exposure::decide(any, false, token()),
            Ok(Exposure::NotServed { .. })
        ));
        assert!(Exposure::decide(any, true, None).is_err());
        assert!(Exposure::decide(any, true, Some(Secret::from("short"))).is_err());
        assert!(matches!(
            Exposure::decide(any, true, token()),
            Ok(Exposure::Served { token: Some(_) })
        ));
    }

    #[test]
    fn only_loopback_host_names_count_as_loopback() {
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
            assert_eq!(
                host_is_loopback(&headers(&[("host", host)])),
                loopback,
                "{host}"
            );
        }
        assert!(!host_is_loopback(&HeaderMap::new()));
    }

    #[test]
    fn a_bearer_token_or_the_session_cookie_signs_in_and_nothing_else_does() {
        let guard = Guard::new(Some(Secret::from(TOKEN)));
        assert!(!guard.is_signed_in(&HeaderMap::new()));
        assert!(guard.is_signed_in(&headers(&[("authorization", &format!("Bearer {TOKEN}"))])));
        assert!(!guard.is_signed_in(&headers(&[("authorization", "Bearer wrong")])));
        let session = format!("other=1; {SESSION_COOKIE}={}", guard.session_value());
        assert!(guard.is_signed_in(&headers(&[("cookie", &session)])));
        assert!(!guard.is_signed_in(&headers(&[("cookie", "triage_admin=forged")])));
        assert!(Guard::new(None).is_signed_in(&HeaderMap::new()));
    }

    #[test]
    fn a_post_needs_the_token_of_its_own_csrf_cookie_and_a_same_origin() {
        let guard = Guard::new(None);
        let (token, set_cookie) = guard.csrf(&HeaderMap::new());
        let nonce = set_cookie
            .unwrap()
            .to_str()
            .unwrap()
            .split(['=', ';'])
            .nth(1)
            .unwrap()
            .to_string();
        let cookie = format!("{CSRF_COOKIE}={nonce}");
        let ok = headers(&[
            ("cookie", &cookie),
            ("sec-fetch-site", "same-origin"),
            ("origin", "http://127.0.0.1:3000"),
            ("host", "127.0.0.1:3000"),
        ]);
        assert_eq!(guard.check_post(&ok, &token), Ok(()));
        assert!(guard.check_post(&ok, "0".repeat(64).as_str()).is_err());
        assert!(guard
            .check_post(
                &headers(&[("cookie", &cookie), ("sec-fetch-site", "cross-site")]),
                &token
            )
            .is_err());
        assert!(guard
            .check_post(
                &headers(&[
                    ("cookie", &cookie),
                    ("origin", "http://evil.example"),
                    ("host", "127.0.0.1:3000")
                ]),
                &token
            )
            .is_err());
        assert!(guard
            .check_post(&headers(&[("sec-fetch-site", "same-origin")]), &token)
            .is_err());
        let other = Guard::new(None);
        assert!(
            other.check_post(&ok, &token).is_err(),
            "tokens are tied to the process key"
        );
    }
}
