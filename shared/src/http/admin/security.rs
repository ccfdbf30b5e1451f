//! Who may use the console and how its forms are protected.
//!
//! - Exposure: the console is one [`Door`](crate::http::loopback::Door) of the local server
//!   (loopback by default; elsewhere only with `--allow-remote-admin` and a token).
//! - Sign-in: `Authorization: Bearer <token>` (scripts) or a session cookie set by the login
//!   form: a random value per sign-in, kept only as its digest, that expires after
//!   [`SESSION_TTL`] and ends at sign-out; `Secure` when served over TLS ([`Guard::over_tls`]).
//! - Cross-site requests: every POST must carry a CSRF token that is an HMAC of the browser's
//!   own `triage_csrf` cookie under a per-process key, and must not come from another site
//!   (`Sec-Fetch-Site`, `Origin`).

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use axum::http::{header, HeaderMap, HeaderValue};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{http::loopback::Token, secret::Secret};

pub const SESSION_COOKIE: &str = "triage_admin";
pub const CSRF_COOKIE: &str = "triage_csrf";
/// How long a sign-in lasts: an operator's working day, not forever.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// The console's secrets for one process: the operator token, a random key for CSRF tokens,
/// and the live sessions (so a restart signs everyone out, which is fine for an operator tool).
pub struct Guard {
    token: Option<Token>,
    key: [u8; 32],
    /// Digest of each live session's cookie value → when it expires.
    sessions: Mutex<HashMap<[u8; 32], Instant>>,
    session_ttl: Duration,
    /// Cookies only over HTTPS: set when the console is served over TLS.
    secure_cookies: bool,
}

type HmacSha256 = Hmac<Sha256>;

fn random_hex<const N: usize>() -> String {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    hex::encode(bytes)
}

impl Guard {
    pub fn new(token: Option<Secret>) -> Self {
        Self::with_session_ttl(token, SESSION_TTL)
    }

    /// A guard whose sessions last `session_ttl` (tests shorten it).
    pub fn with_session_ttl(token: Option<Secret>, session_ttl: Duration) -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source is available");
        Self {
            token: token.as_ref().map(Token::new),
            key,
            sessions: Mutex::new(HashMap::new()),
            session_ttl,
            secure_cookies: false,
        }
    }

    /// The same guard for a console served over TLS: its cookies are `Secure`, so a browser
    /// never sends them over plain HTTP.
    pub fn over_tls(self) -> Self {
        Self {
            secure_cookies: true,
            ..self
        }
    }

    pub fn requires_token(&self) -> bool {
        self.token.is_some()
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
        self.token.as_ref().is_some_and(|t| t.matches(candidate))
    }

    /// Starts a session after a successful login: its cookie value, new and random each time.
    pub fn start_session(&self) -> String {
        let value = random_hex::<32>();
        let now = Instant::now();
        let mut sessions = self.sessions.lock().expect("sessions lock");
        sessions.retain(|_, expires| *expires > now);
        sessions.insert(digest(&value), now + self.session_ttl);
        value
    }

    /// Ends the request's session (sign-out); a later request with its cookie is signed out.
    pub fn end_session(&self, headers: &HeaderMap) {
        if let Some(value) = cookie(headers, SESSION_COOKIE) {
            self.sessions
                .lock()
                .expect("sessions lock")
                .remove(&digest(value));
        }
    }

    fn session_is_live(&self, value: &str) -> bool {
        let sessions = self.sessions.lock().expect("sessions lock");
        sessions
            .get(&digest(value))
            .is_some_and(|expires| *expires > Instant::now())
    }

    /// Signed in: no token configured, a matching bearer token, or a live session cookie.
    pub fn is_signed_in(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        token.presented_in(headers)
            || cookie(headers, SESSION_COOKIE).is_some_and(|v| self.session_is_live(v))
    }

    /// The session cookie for `value`, expiring with the session.
    pub fn session_cookie(&self, value: &str) -> HeaderValue {
        self.cookie_header(
            SESSION_COOKIE,
            value,
            &format!("; Max-Age={}", self.session_ttl.as_secs()),
        )
    }

    /// Not readable by scripts, never sent by another site, only to the console's paths;
    /// `Secure` over TLS. (On loopback the console is plain HTTP, an SSM tunnel.)
    fn cookie_header(&self, name: &str, value: &str, attributes: &str) -> HeaderValue {
        let secure = if self.secure_cookies { "; Secure" } else { "" };
        cookie_header_with(name, value, &format!("{attributes}{secure}"))
    }

    /// The CSRF token for forms on this page, and the cookie to set when the browser has none.
    pub fn csrf(&self, headers: &HeaderMap) -> (String, Option<HeaderValue>) {
        if let Some(existing) = cookie(headers, CSRF_COOKIE).filter(|v| v.len() == 32) {
            return (self.sign("csrf", existing), None);
        }
        let nonce = random_hex::<16>();
        (
            self.sign("csrf", &nonce),
            Some(self.cookie_header(CSRF_COOKIE, &nonce, "")),
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

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

/// `Sec-Fetch-Site` (sent by every current browser) must say same-origin; `Origin`, when
/// present, must name the host the request was sent to. Clients that send neither (curl with
/// a bearer token) still need the CSRF token.
pub fn same_origin(headers: &HeaderMap) -> Result<(), &'static str> {
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

fn cookie_header_with(name: &str, value: &str, attributes: &str) -> HeaderValue {
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/admin; HttpOnly; SameSite=Strict{attributes}"
    ))
    .expect("hex cookie values are valid header text")
}

/// Clears `name` in the browser (sign-out).
pub fn expired_cookie(name: &str) -> HeaderValue {
    cookie_header_with(name, "", "; Max-Age=0")
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
    fn a_bearer_token_or_a_live_session_cookie_signs_in_and_nothing_else_does() {
        let guard = Guard::new(Some(Secret::from(TOKEN)));
        assert!(!guard.is_signed_in(&HeaderMap::new()));
        assert!(guard.is_signed_in(&headers(&[("authorization", &format!("Bearer {TOKEN}"))])));
        assert!(!guard.is_signed_in(&headers(&[("authorization", "Bearer wrong")])));
        let session = guard.start_session();
        let cookie = format!("other=1; {SESSION_COOKIE}={session}");
        assert!(guard.is_signed_in(&headers(&[("cookie", &cookie)])));
        assert!(!guard.is_signed_in(&headers(&[("cookie", "triage_admin=forged")])));
        assert!(Guard::new(None).is_signed_in(&HeaderMap::new()));
    }

    #[test]
    fn each_sign_in_gets_its_own_session_which_expires_and_ends_at_sign_out() {
        let guard = Guard::new(Some(Secret::from(TOKEN)));
        let (one, two) = (guard.start_session(), guard.start_session());
        assert_ne!(one, two, "random per sign-in, not one value per process");
        let with = |value: &str| headers(&[("cookie", &format!("{SESSION_COOKIE}={value}"))]);
        guard.end_session(&with(&one));
        assert!(!guard.is_signed_in(&with(&one)), "signed out");
        assert!(
            guard.is_signed_in(&with(&two)),
            "the other session lives on"
        );
        assert!(guard
            .session_cookie(&two)
            .to_str()
            .unwrap()
            .contains("Max-Age=28800"));

        let short = Guard::with_session_ttl(Some(Secret::from(TOKEN)), Duration::ZERO);
        let expired = short.start_session();
        assert!(!short.is_signed_in(&with(&expired)), "expired");
    }

    #[test]
    fn cookies_are_secure_over_tls_only() {
        let secure = |guard: &Guard| {
            let (_, csrf) = guard.csrf(&HeaderMap::new());
            [guard.session_cookie("00"), csrf.unwrap()]
                .map(|cookie| cookie.to_str().unwrap().ends_with("; Secure"))
        };
        assert_eq!(secure(&Guard::new(None)), [false, false]);
        assert_eq!(secure(&Guard::new(None).over_tls()), [true, true]);
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
