//! What every AWS client here shares: region and credentials from the variables Lambda sets
//! (so aws-config and its STS/SSO clients stay out of the binaries), the SDK's hyper client on
//! rustls/ring, bounded timeouts, and an endpoint override for tests and local emulators.

use std::time::Duration;

use aws_sdk_secretsmanager::config::{
    timeout::TimeoutConfig, BehaviorVersion, Credentials, Region, SharedCredentialsProvider,
};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_types::SdkConfig;

use crate::domain::error::ConfigError;

/// The settings of one service's client, from the standard `AWS_*` variables read through
/// `get`; `service` is the suffix of the service's own endpoint variable
/// (`AWS_ENDPOINT_URL_SQS`, else `AWS_ENDPOINT_URL`), `purpose` says what the client is needed
/// for, in errors.
pub(super) fn settings(
    get: impl Fn(&str) -> Option<String>,
    service: &str,
    purpose: &str,
) -> Result<SdkConfig, ConfigError> {
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
    let mut config = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .http_client(
            aws_smithy_http_client::Builder::new()
                .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
                .build_https(),
        )
        // Bounded like the database, and well inside Lambda's 10 s init limit: an endpoint
        // the subnets cannot reach fails with this error, never with a timeout.
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(2))
                .operation_timeout(Duration::from_secs(5))
                .build(),
        );
    if let Some(url) =
        get(&format!("AWS_ENDPOINT_URL_{service}")).or_else(|| get("AWS_ENDPOINT_URL"))
    {
        config = config.endpoint_url(url);
    }
    Ok(config.build())
}
