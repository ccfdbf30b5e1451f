//! Which provider, where, with which key and at which prices: plain data, filled from the
//! environment by `crate::config` and, for a key in Secrets Manager, by `crate::aws`.

use super::prices::PriceTable;
use crate::secret::Credential;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    Rules,
    OpenAi,
    Anthropic,
}

#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    pub url: String,
    /// Fixed (`TRIAGE_PROVIDER_API_KEY`, local runs and tests) or read from Secrets Manager
    /// and re-read when the provider refuses it.
    pub api_key: Credential,
    /// `TRIAGE_PROVIDER_SECRET_ARN`: `crate::aws::secrets::resolve` reads `api_key` from it.
    pub api_key_secret_arn: Option<String>,
    pub prices: PriceTable,
}
