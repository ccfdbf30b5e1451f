//! Webhooks per Standard Webhooks 1.0: `webhook-id` (the event id, the same on every attempt),
//! `webhook-timestamp` (seconds), `webhook-signature` (`v1,` + base64 HMAC-SHA256 of
//! `id.timestamp.body` under the `whsec_` secret's bytes; both secrets during a rotation).
//! One HTTP client for every endpoint: no redirects followed, no hidden retries (the outbox
//! owns retries), a timeout per request, and a resolver that refuses private addresses.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{
    address::{self, Refused},
    decision::Attempt,
};

const SECRET_PREFIX: &str = "whsec_";

/// A new signing secret: 32 random bytes, as Standard Webhooks writes them.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// `v1,<signature>` of `id.timestamp.body` under `secret`.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = STANDARD
        .decode(secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret))
        // Our secrets are always base64; a stored value that is not would be a bug, and
        // signing with its raw bytes still never leaks it.
        .unwrap_or_else(|_| secret.as_bytes().to_vec());
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The HTTP client every webhook delivery goes through.
#[derive(Clone)]
pub struct WebhookClient {
    client: reqwest::Client,
    allowed_hosts: Arc<Vec<String>>,
}

impl WebhookClient {
    pub fn new(timeout: Duration, allowed_hosts: Vec<String>) -> Result<Self, reqwest::Error> {
        let allowed_hosts = Arc::new(allowed_hosts);
        let client = crate::tls::https_client_builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(CheckedResolver(allowed_hosts.clone())))
            .user_agent("triage-webhooks/1")
            .build()?;
        Ok(Self {
            client,
            allowed_hosts,
        })
    }

    /// One attempt: POST `body` to `url`, signed with each of `secrets`.
    pub async fn send(
        &self,
        url: &str,
        event_id: &str,
        timestamp: i64,
        body: Vec<u8>,
        secrets: &[&str],
    ) -> Attempt {
        // The URL is checked again at each attempt: the allow-list may have changed since the
        // subscription was made, and IP literals never reach the resolver.
        if let Err(refused) = address::check_url(url, &self.allowed_hosts) {
            return Attempt::Refused(refused.to_string());
        }
        let signatures: Vec<String> = secrets
            .iter()
            .map(|secret| sign(secret, event_id, timestamp, &body))
            .collect();
        let sent = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", event_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signatures.join(" "))
            .body(body)
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => Attempt::Acknowledged,
            Ok(response) => Attempt::Failed(format!("HTTP {}", response.status().as_u16())),
            Err(error) => match refused_in(&error) {
                Some(refused) => Attempt::Refused(refused.to_string()),
                None if error.is_timeout() => Attempt::Failed("timed out".into()),
                None if error.is_connect() => Attempt::Failed("connection failed".into()),
                None => Attempt::Failed("request failed".into()),
            },
        }
    }
}

/// The resolver's refusal, if that is why the request failed.
fn refused_in(error: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused.clone());
        }
        cause = e.source();
    }
    None
}

/// Resolves like the system does, then refuses a host whose addresses are not all public
/// (unless allowed): the check and the connection use the same addresses.
struct CheckedResolver(Arc<Vec<String>>);

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allowed = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let ips: Vec<_> = addrs.iter().map(SocketAddr::ip).collect();
            address::check_addresses(&host, &ips, &allowed)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference libraries.
    #[test]
    fn signs_the_reference_example() {
        let signature = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn secrets_are_whsec_and_distinct() {
        let (a, b) = (new_secret(), new_secret());
        assert!(a.starts_with("whsec_") && a.len() > 40);
        assert_ne!(a, b);
    }
}
