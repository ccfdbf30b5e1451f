//! Which provider, where, with which key and at which prices: plain data, filled from the
//! environment by `crate::config` and, for a key in Secrets Manager, by `crate::aws`.

use std::sync::Arc;

use super::prices::PriceTable;
use crate::secret::{RotatingSecret, Secret};

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
    pub api_key: ApiKey,
    /// `TRIAGE_PROVIDER_SECRET_ARN`: `crate::aws::secrets::resolve` reads `api_key` from it.
    pub api_key_secret_arn: Option<String>,
    pub prices: PriceTable,
}

/// The provider key: fixed (`TRIAGE_PROVIDER_API_KEY`, local runs and tests) or read from
/// Secrets Manager and re-read when the provider refuses it.
#[derive(Clone, Debug)]
pub enum ApiKey {
    /// In an `Arc` like a rotating key, so a call takes the key without copying it.
    Fixed(Arc<Secret>),
    Rotating(Arc<RotatingSecret<Secret>>),
}

impl ApiKey {
    /// The key to call with, and its generation (to hand back to [`Self::refused`]).
    pub fn current(&self) -> (u64, Arc<Secret>) {
        match self {
            ApiKey::Fixed(key) => (0, key.clone()),
            ApiKey::Rotating(secret) => secret.current(),
        }
    }

    /// Called after key `generation` was refused: the next call uses the re-read key, if the
    /// secret has changed since. A fixed key stays as it is.
    pub async fn refused(&self, generation: u64) {
        if let ApiKey::Rotating(secret) = self {
            secret.refresh(generation).await;
        }
    }
}

impl From<Secret> for ApiKey {
    fn from(key: Secret) -> Self {
        ApiKey::Fixed(Arc::new(key))
    }
}
