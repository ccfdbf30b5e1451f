//! Zendesk (docs/zendesk.md): the webhook's signature ([`signature`]), its ticket events
//! ([`events`]), and the Support API the connector calls ([`api`]: show and update a ticket
//! with safe update, the API user, the cursor-based incremental ticket export).

pub mod api;
pub mod events;
pub mod signature;

use crate::secret::Secret;

/// `TRIAGE_ZENDESK_*` (SPEC): the account's base URL, the dedicated agent's email and API
/// token (basic authentication as `email/token:api_token`), the webhook's signing secret,
/// and the account's API rate limit shared by every deliverer.
#[derive(Debug, Clone)]
pub struct ZendeskConfig {
    /// `https://acme.zendesk.com`, without a trailing slash; `None`: no write-back.
    pub url: Option<String>,
    pub email: String,
    pub api_token: Secret,
    /// `None`: the events route does not exist (404).
    pub webhook_secret: Option<Secret>,
    /// `TRIAGE_ZENDESK_SECRET_ARN` (Lambda): a Secrets Manager secret holding `api_token` and
    /// `webhook_secret`, fetched at start by `aws::secrets`.
    pub secret_arn: Option<String>,
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
    /// The account's API, when the connector is configured to write back.
    pub fn api(&self, timeout: std::time::Duration) -> Option<Result<api::Client, api::ApiError>> {
        let url = self.url.as_deref()?;
        Some(api::Client::new(url, &self.email, &self.api_token, timeout))
    }
}
