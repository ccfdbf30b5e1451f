//! Placeholder until the adapter lands: every call fails as provider-wide.

use std::time::Duration;

use super::{EvaluationRequest, FailureKind, Provider, ProviderError, ProviderReply};
use crate::config::ProviderConfig;

pub struct OpenAiProvider;

impl OpenAiProvider {
    pub fn new(_config: &ProviderConfig, _call_timeout: Duration) -> Result<Self, ProviderError> {
        Ok(Self)
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &'static str {
        "openai"
    }

    async fn evaluate(
        &self,
        _request: EvaluationRequest<'_>,
    ) -> Result<ProviderReply, ProviderError> {
        Err(ProviderError::new(
            FailureKind::ConnectFailed,
            "adapter not built yet",
        ))
    }
}
