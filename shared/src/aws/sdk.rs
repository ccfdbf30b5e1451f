//! What every AWS client here shares: region and credentials from the variables Lambda sets
//! (so aws-config and its STS/SSO clients stay out of the binaries), the SDK's hyper client on
//! rustls/ring, bounded timeouts, and an endpoint override for tests and local emulators.

use std::time::Duration;

use aws_sdk_secretsmanager::config::{
    timeout::TimeoutConfig, Credentials, Region, SharedHttpClient,
};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use crate::domain::error::ConfigError;

pub(super) struct ClientSettings {
    pub region: Region,
    pub credentials: Credentials,
    pub http: SharedHttpClient,
    pub timeouts: TimeoutConfig,
    /// `AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`.
    pub endpoint: Option<String>,
}

/// Reads the standard `AWS_*` variables through `get`; `service` is the suffix of the
/// service's own endpoint variable (`SECRETS_MANAGER`, `SQS`), `purpose` says what the client
/// is needed for, in errors.
pub(super) fn settings(
    get: impl Fn(&str) -> Option<String>,
    service: &str,
    purpose: &str,
) -> Result<ClientSettings, ConfigError> {
    let get = |name: &str| get(name).filter(|v| !v.is_empty());
    let required = |name: &str| {
        get(name)
            .ok_or_else(|| ConfigError::invalid(name, format!("is not set (needed {purpose})")))
    };
    let region = get("AWS_REGION").map_or_else(|| required("AWS_DEFAULT_REGION"), Ok)?;
    let credentials = Credentials::new(
        required("AWS_ACCESS_KEY_ID")?,
        required("AWS_SECRET_ACCESS_KEY")?,
        get("AWS_SESSION_TOKEN"),
        None,
        "environment",
    );
    Ok(ClientSettings {
        region: Region::new(region),
        credentials,
        http: aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https(),
        // Bounded like the database, and well inside Lambda's 10 s init limit: an endpoint
        // the subnets cannot reach fails with this error, never with a timeout.
        timeouts: TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(2))
            .operation_timeout(Duration::from_secs(5))
            .build(),
        endpoint: get(&format!("AWS_ENDPOINT_URL_{service}")).or_else(|| get("AWS_ENDPOINT_URL")),
    })
}
