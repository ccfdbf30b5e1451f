//! One object read from S3 (an operator's labelled set, `triage eval --set s3://BUCKET/KEY`):
//! a GET signed by the SDK's own SigV4 signer (`aws-sigv4`), with the region and credentials
//! Lambda sets (as every client here, `sdk`), over the pipeline's rustls client, size-bounded.
//! The SDK's S3 client would bring some twenty more crates into every binary for one GET.

use std::{fmt, str::FromStr, time::SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::{
    http_request::{
        sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest,
        SigningSettings, UriPathNormalizationMode,
    },
    sign::v4,
};
use aws_smithy_runtime_api::client::identity::Identity;
use reqwest::Url;

use crate::{domain::error::InvalidRequest, tls};

/// `s3://BUCKET/KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    pub key: String,
}

impl FromStr for S3Location {
    type Err = InvalidRequest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidRequest::new("set", format!("{s:?} is not s3://BUCKET/KEY"));
        let (bucket, key) = s
            .strip_prefix("s3://")
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(bad)?;
        // S3's bucket naming rules, enough to keep a bucket out of a host name's other parts.
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !bucket_ok || key.is_empty() {
            return Err(bad());
        }
        Ok(Self {
            bucket: bucket.into(),
            key: key.into(),
        })
    }
}

impl fmt::Display for S3Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.key)
    }
}

/// The object's bytes, at most `max_bytes` of them (a larger object is refused, not cut).
/// `get` reads the standard `AWS_*` variables; `AWS_ENDPOINT_URL_S3` (else
/// `AWS_ENDPOINT_URL`) points it at an emulator, path-style.
pub async fn get_object(
    location: &S3Location,
    max_bytes: u64,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Vec<u8>, InvalidRequest> {
    let fail = |why: String| InvalidRequest::new("set", format!("{location}: {why}"));
    let get = |name: &str| get(name).filter(|v| !v.is_empty());
    let required = |name: &str| get(name).ok_or_else(|| fail(format!("{name} is not set")));
    let region = get("AWS_REGION").map_or_else(|| required("AWS_DEFAULT_REGION"), Ok)?;
    let url = object_url(
        location,
        &region,
        get("AWS_ENDPOINT_URL_S3").or_else(|| get("AWS_ENDPOINT_URL")),
    )
    .map_err(|e| fail(format!("no URL for it: {e}")))?;
    // Signed requests go over TLS, but to an emulator on this machine.
    if url.scheme() != "https" && !tls::is_loopback(&url) {
        return Err(fail(format!("{url} is neither https nor loopback")));
    }
    let identity: Identity = Credentials::new(
        required("AWS_ACCESS_KEY_ID")?,
        required("AWS_SECRET_ACCESS_KEY")?,
        get("AWS_SESSION_TOKEN"),
        None,
        "environment",
    )
    .into();
    let mut settings = SigningSettings::default();
    // S3's own canonical form: the path as sent, and the payload hash in a header.
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(&region)
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| fail(e.to_string()))?
        .into();
    let signable = SignableRequest::new(
        "GET",
        url.as_str(),
        std::iter::empty(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| fail(e.to_string()))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| fail(e.to_string()))?
        .into_parts();
    let client = tls::https_client_builder()
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let mut request = client.get(url);
    for (name, value) in instructions.headers() {
        request = request.header(name, value);
    }
    let mut response = request
        .send()
        .await
        .map_err(|e| fail(format!("not read: {e}")))?;
    if !response.status().is_success() {
        return Err(fail(format!("S3 answered {}", response.status())));
    }
    let too_large = || fail(format!("larger than {max_bytes} bytes"));
    if response.content_length().is_some_and(|n| n > max_bytes) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| fail(format!("not read: {e}")))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max_bytes {
            return Err(too_large());
        }
    }
    Ok(bytes)
}

/// Virtual-hosted style on AWS, path style on an endpoint override; the key's segments
/// percent-encoded.
fn object_url(
    location: &S3Location,
    region: &str,
    endpoint: Option<String>,
) -> Result<Url, String> {
    let (base, path_style) = match endpoint {
        Some(endpoint) => (endpoint, true),
        None => (
            format!("https://{}.s3.{region}.amazonaws.com", location.bucket),
            false,
        ),
    };
    let mut url = Url::parse(&base).map_err(|e| e.to_string())?;
    {
        let mut segments = url
            .path_segments_mut()
            .map_err(|()| "not a base URL".to_string())?;
        segments.pop_if_empty();
        if path_style {
            segments.push(&location.bucket);
        }
        segments.extend(location.key.split('/'));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_s3_bucket_slash_key_and_nothing_else() {
        let at: S3Location = "s3://my-sets/eval/v2 set.jsonl".parse().unwrap();
        assert_eq!(
            (at.bucket.as_str(), at.key.as_str()),
            ("my-sets", "eval/v2 set.jsonl")
        );
        assert_eq!(at.to_string(), "s3://my-sets/eval/v2 set.jsonl");
        for bad in [
            "s3://bucket",
            "s3://b/k",
            "s3://Bad_Bucket/k",
            "https://x/y",
            "s3:///k",
            "s3://evil.com@x/k",
        ] {
            assert!(bad.parse::<S3Location>().is_err(), "{bad}");
        }
        let url = object_url(&at, "eu-west-1", None).unwrap();
        assert_eq!(
            url.as_str(),
            "https://my-sets.s3.eu-west-1.amazonaws.com/eval/v2%20set.jsonl"
        );
        let local = object_url(&at, "eu-west-1", Some("http://127.0.0.1:5000".into())).unwrap();
        assert_eq!(
            local.as_str(),
            "http://127.0.0.1:5000/my-sets/eval/v2%20set.jsonl"
        );
    }
}
