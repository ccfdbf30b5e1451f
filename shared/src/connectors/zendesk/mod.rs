//! Zendesk (docs/zendesk.md): the webhook's signature ([`signature`]), its ticket events
//! ([`events`]), and the Support API the connector calls ([`api`]: show and update a ticket
//! with safe update, the API user, the cursor-based incremental ticket export).

pub mod api;
pub mod events;
pub mod signature;

use std::time::Duration;

use crate::{domain::error::ConfigError, secret::Credential};

/// At most one re-read of the token's or the signing secret's secret a minute per container:
/// anyone on the internet can send a badly signed event, and none of them may turn into a
/// Secrets Manager call each.
pub const SECRET_REFRESH_INTERVAL: Duration = Duration::from_secs(60);

/// How long a signing secret stays accepted after a re-read replaced it: events Zendesk
/// signed before the reset may still be on their way.
pub const SIGNING_SECRET_OVERLAP: Duration = Duration::from_secs(10 * 60);

/// `TRIAGE_ZENDESK_*` (SPEC): the account's base URL, the dedicated agent's email and API
/// token (basic authentication as `email/token:api_token`), the webhook's signing secret,
/// and the account's API rate limit shared by every deliverer.
#[derive(Debug, Clone)]
pub struct ZendeskConfig {
    /// `https://acme.zendesk.com` (plain http only to loopback), without a trailing slash;
    /// `None`: no write-back.
    pub url: Option<String>,
    pub email: String,
    /// Re-read (at most once a minute) when Zendesk answers 401.
    pub api_token: Credential,
    /// `None`: the events route does not exist (404). Re-read (at most once a minute) when a
    /// signature does not match; the value it replaced stays accepted for
    /// [`SIGNING_SECRET_OVERLAP`].
    pub webhook_secret: Option<Credential>,
    /// `TRIAGE_ZENDESK_SECRET_ARN` (Lambda): a Secrets Manager secret holding `api_token` and,
    /// where no signing secret of its own is configured, `webhook_secret`; read by
    /// `aws::secrets`.
    pub secret_arn: Option<String>,
    /// `TRIAGE_ZENDESK_SIGNING_SECRET_ARN` (Lambda, the API function only): the signing
    /// secret on its own, so the function facing the internet holds no token.
    pub signing_secret_arn: Option<String>,
    /// Requests per minute for the whole account; `None`: only Zendesk's 429s pace us.
    pub requests_per_minute: Option<u32>,
    /// `TRIAGE_ZENDESK_UPDATE_RPM`: ticket updates per minute, within the above. Zendesk caps
    /// Update Ticket at 100 a minute per account, and the agents' own saves count against it.
    pub update_requests_per_minute: u32,
}

/// `TRIAGE_ZENDESK_UPDATE_RPM`'s default: a fifth of Zendesk's 100 updates a minute is left to
/// the agents' own saves while a backlog drains.
pub const DEFAULT_UPDATE_RPM: u32 = 80;

impl ZendeskConfig {
    /// `TRIAGE_ZENDESK_URL` without its trailing slash, refused where the API token would
    /// travel in clear.
    pub fn checked_url(url: &str) -> Result<String, ConfigError> {
        let invalid = |why: &str| ConfigError::invalid("TRIAGE_ZENDESK_URL", why.into());
        let parsed = reqwest::Url::parse(url).map_err(|_| invalid("is not a URL"))?;
        crate::tls::refuse_in_clear(&parsed).map_err(invalid)?;
        Ok(url.trim_end_matches('/').to_string())
    }

    /// The account's API, when the connector is configured to write back.
    pub fn api(&self, timeout: Duration) -> Option<Result<api::Client, api::ApiError>> {
        let url = self.url.as_deref()?;
        Some(api::Client::new(url, &self.email, &self.api_token, timeout))
    }
}
