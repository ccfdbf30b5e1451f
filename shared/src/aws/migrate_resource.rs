//! Migrations on deploy: `triage-migrate` is the handler of the `Migration` custom resource in
//! `template.yaml` (whose comments state the contract). Every request is answered, SUCCESS or
//! FAILED, by a PUT of the response document to the request's pre-signed `ResponseURL`, and
//! within the invocation's deadline: a CloudFormation stack never waits on a silent handler.
//!
//! - Create/Update: apply the embedded migrations ([`db::migrate`]: idempotent, advisory-locked).
//!   When `MigrateVersion` is not this function version, CloudFormation is rolling back to an
//!   older release's properties while the new code still runs: answer SUCCESS without
//!   migrating (the schema only moves forward), so a failed migration cannot also fail its
//!   rollback.
//! - Delete: SUCCESS, and nothing touched (the data outlives the stack).
//! - A panic while a request is in hand is answered FAILED too ([`install_panic_hook`]): the
//!   release profile aborts on panic, so neither `catch_unwind` nor a task's `JoinError` ever
//!   sees it, and without an answer CloudFormation would wait for the whole `ServiceTimeout`.

use std::{
    future::Future,
    panic::PanicHookInfo,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};

use crate::{db, Result};

/// The same id in every answer: a new one would make CloudFormation delete the "old" resource.
pub const PHYSICAL_RESOURCE_ID: &str = "triage-migrations";

/// Kept back from the invocation's deadline to deliver the answer.
const ANSWER_MARGIN: Duration = Duration::from_secs(5);

/// Attempts to deliver the answer (S3 can refuse a request now and then).
const ANSWER_ATTEMPTS: u32 = 3;

/// CloudFormation's request (the fields this handler reads).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Request {
    pub request_type: RequestType,
    #[serde(rename = "ResponseURL")]
    pub response_url: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    #[serde(default)]
    pub resource_properties: Properties,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum RequestType {
    Create,
    Update,
    Delete,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Properties {
    /// `!Ref MigrateFunction.Version`: the ARN of the version published with this deploy.
    pub migrate_version: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Success,
    Failed,
}

/// The response document, and the handler's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Response {
    pub status: Status,
    pub reason: String,
    pub physical_resource_id: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    pub data: Data,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Data {
    /// Migrations this request applied (0 when skipped or already up to date).
    pub applied: usize,
}

/// The answer could not be delivered: CloudFormation will give up on its own after the
/// resource's `ServiceTimeout`.
#[derive(Debug, thiserror::Error)]
#[error("could not deliver the answer to the ResponseURL: {0}")]
pub struct AnswerNotDelivered(String);

impl From<AnswerNotDelivered> for lambda_runtime::Diagnostic {
    fn from(err: AnswerNotDelivered) -> Self {
        lambda_runtime::Diagnostic {
            error_type: "AnswerNotDelivered".into(),
            error_message: err.to_string(),
        }
    }
}

/// Whether this request migrates, and if not, why not (the answer's `Reason`).
fn skip_reason(request: &Request, function_version: Option<&str>) -> Option<String> {
    if request.request_type == RequestType::Delete {
        return Some("Delete: nothing to do, the schema and data outlive the stack".into());
    }
    let requested = request.resource_properties.migrate_version.as_deref();
    match (requested, function_version) {
        (Some(requested), Some(running)) if requested.ends_with(&format!(":{running}")) => None,
        _ => Some(format!(
            "MigrateVersion {} is not this function's version {}: a rollback to an older \
             release's properties; the schema only moves forward, so nothing to do",
            requested.unwrap_or("(missing)"),
            function_version.unwrap_or("(unknown)"),
        )),
    }
}

/// The request being handled and its invocation's deadline, for the panic hook. One slot:
/// Lambda hands a process one request at a time.
static IN_HAND: Mutex<Option<(Request, Instant)>> = Mutex::new(None);

fn in_hand() -> std::sync::MutexGuard<'static, Option<(Request, Instant)>> {
    // Nothing panics while holding it; if something did, the slot is still what we want.
    IN_HAND.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes any panic while a request is in hand answer that request FAILED, then abort. The
/// release profile (`panic = "abort"`) would abort right after the hook anyway; aborting in
/// every build keeps tests (which unwind) on the deployed path, and a process that panicked
/// mid-migration is not one to keep serving. Call once, before the runtime starts.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info); // the message and location, on stderr as usual
        if let Some((request, deadline)) = in_hand().take() {
            answer_after_panic(request, deadline, info);
            std::process::abort();
        }
    }));
}

/// Delivers FAILED from inside the panic hook. The panicking thread may be a runtime worker
/// (where no runtime can be entered), and the runtime's own client may be in any state: a
/// fresh thread with a fresh runtime and client does the one PUT.
fn answer_after_panic(request: Request, deadline: Instant, info: &PanicHookInfo<'_>) {
    let what = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    let location = info
        .location()
        .map(|l| format!(" at {}:{}", l.file(), l.line()))
        .unwrap_or_default();
    let reason = format!("the migrate function panicked{location}: {what}");
    let response = answer(request.clone(), Status::Failed, reason, 0);
    let delivered = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| AnswerNotDelivered(e.to_string()))?;
        let http = crate::tls::https_client_builder()
            .build()
            .map_err(|e| AnswerNotDelivered(e.to_string()))?;
        runtime.block_on(deliver(&http, &request.response_url, &response, deadline))
    })
    .join();
    match delivered {
        Ok(Ok(())) => eprintln!("migrate: answered FAILED after the panic"),
        Ok(Err(error)) => eprintln!("migrate: {error}"),
        Err(_) => eprintln!("migrate: delivering the answer after the panic panicked too"),
    }
}

fn answer(request: Request, status: Status, reason: String, applied: usize) -> Response {
    Response {
        status,
        reason: truncate(reason),
        physical_resource_id: PHYSICAL_RESOURCE_ID.into(),
        stack_id: request.stack_id,
        request_id: request.request_id,
        logical_resource_id: request.logical_resource_id,
        data: Data { applied },
    }
}

/// Handles one request and delivers its answer. `migrate` applies the migrations (in Lambda:
/// [`migrate_from_env`]); `function_version` is `AWS_LAMBDA_FUNCTION_VERSION`, `region` the
/// function's own (`AWS_REGION`: the stack's, whose response bucket alone may be answered);
/// `deadline` the invocation's. The answer is returned too, for the log.
pub async fn handle<M, F>(
    request: Request,
    function_version: Option<&str>,
    region: Option<&str>,
    deadline: Instant,
    http: &reqwest::Client,
    migrate: M,
) -> Result<Response, AnswerNotDelivered>
where
    M: FnOnce() -> F,
    F: Future<Output = Result<usize>>,
{
    // A request naming any other URL is not CloudFormation's: nothing is migrated or sent.
    if !is_cloudformation_url(&request.response_url, region) {
        return Err(AnswerNotDelivered(
            "the ResponseURL is not CloudFormation's response bucket on S3: refused, nothing done"
                .into(),
        ));
    }
    *in_hand() = Some((request.clone(), deadline));
    let (status, reason, applied) = match skip_reason(&request, function_version) {
        Some(reason) => (Status::Success, reason, 0),
        None => {
            let budget = deadline
                .checked_sub(ANSWER_MARGIN)
                .unwrap_or_else(Instant::now);
            // Boxed: the migration's future (SDK calls included) is too deep to nest inline.
            match tokio::time::timeout_at(budget.into(), Box::pin(migrate())).await {
                Ok(Ok(applied)) => (
                    Status::Success,
                    format!("{applied} migration(s) applied"),
                    applied,
                ),
                Ok(Err(error)) => (Status::Failed, format!("migration failed: {error}"), 0),
                Err(_) => (
                    Status::Failed,
                    "migrations did not finish before the function's timeout (is another \
                     session holding the migration lock?)"
                        .into(),
                    0,
                ),
            }
        }
    };
    // From here on a panic is no longer the migration's: the answer below is the one.
    in_hand().take();
    let url = request.response_url.clone();
    let response = answer(request, status, reason, applied);
    tracing::info!(status = ?response.status, reason = %response.reason, "custom resource answer");
    deliver(http, &url, &response, deadline).await?;
    Ok(response)
}

/// The bucket CloudFormation answers custom resources through, one per region
/// (`cloudformation-custom-resource-response-euwest1`).
const RESPONSE_BUCKET: &str = "cloudformation-custom-resource-response-";

/// CloudFormation's pre-signed response URLs: https to its own response bucket on S3
/// (`amazonaws.com`, `.com.cn` in China) of `region`, the function's own (a stack answers
/// through its region's bucket; anyone can create a bucket named like another region's),
/// virtual-hosted or path-style, so a forged event cannot make the function send its answer
/// (or anything) to any other host or bucket. Plain http to loopback stands in for S3 in debug
/// builds (the tests) only, never in a release build.
fn is_cloudformation_url(url: &str, region: Option<&str>) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    if cfg!(debug_assertions) && crate::tls::is_loopback(&url) {
        return true;
    }
    let (Some(host), Some(region)) = (url.host_str(), region) else {
        return false;
    };
    let response_bucket = format!("{RESPONSE_BUCKET}{}", region.replace('-', ""));
    let Some(s3) = ["amazonaws.com", "amazonaws.com.cn"]
        .iter()
        .find_map(|domain| host.strip_suffix(domain)?.strip_suffix('.'))
    else {
        return false;
    };
    let is_s3 = |name: &str| name == "s3" || name.starts_with("s3.") || name.starts_with("s3-");
    let bucket_host = s3
        .split_once('.')
        .is_some_and(|(bucket, rest)| bucket == response_bucket && is_s3(rest));
    let bucket_path = is_s3(s3)
        && url
            .path_segments()
            .and_then(|mut segments| segments.next())
            .is_some_and(|bucket| bucket == response_bucket);
    url.scheme() == "https" && url.username().is_empty() && (bucket_host || bucket_path)
}

/// CloudFormation refuses answers over 4 KiB; the reason is the only part that can grow.
fn truncate(mut reason: String) -> String {
    const MAX: usize = 1024;
    if reason.len() > MAX {
        let mut end = MAX;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push('…');
    }
    reason
}

async fn deliver(
    http: &reqwest::Client,
    url: &str,
    response: &Response,
    deadline: Instant,
) -> Result<(), AnswerNotDelivered> {
    let body = serde_json::to_vec(response).map_err(|e| AnswerNotDelivered(e.to_string()))?;
    let mut last_error = String::new();
    for attempt in 0..ANSWER_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            break;
        }
        // The URL is pre-signed without a content type: sending one would break the signature.
        let sent = http
            .put(url)
            .header(reqwest::header::CONTENT_TYPE, "")
            .body(body.clone())
            .timeout(remaining)
            .send()
            .await;
        match sent.and_then(reqwest::Response::error_for_status) {
            Ok(_) => return Ok(()),
            Err(error) => {
                // The URL carries a signature; the error's URL is left out of the log.
                last_error = error.without_url().to_string();
                tracing::warn!(attempt, error = %last_error, "delivering the custom resource answer failed");
            }
        }
    }
    Err(AnswerNotDelivered(last_error))
}

/// The Lambda's migration: configuration and secrets from the environment, then
/// [`db::migrate`]. Loaded per request, so a configuration error is answered as FAILED.
pub async fn migrate_from_env() -> Result<usize> {
    let config = super::lambda::config_from_env().await?;
    db::migrate(&config.database).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: RequestType, version: Option<&str>) -> Request {
        Request {
            request_type: kind,
            response_url: String::new(),
            stack_id: String::new(),
            request_id: String::new(),
            logical_resource_id: String::new(),
            resource_properties: Properties {
                migrate_version: version.map(Into::into),
            },
        }
    }

    #[test]
    fn only_this_versions_create_and_update_migrate() {
        let arn =
            |v: &str| format!("arn:aws:lambda:eu-west-1:123456789012:function:triage-migrate:{v}");
        for kind in [RequestType::Create, RequestType::Update] {
            assert_eq!(
                skip_reason(&request(kind, Some(&arn("13"))), Some("13")),
                None
            );
            assert!(skip_reason(&request(kind, Some(&arn("13"))), Some("3")).is_some());
            assert!(skip_reason(&request(kind, Some(&arn("12"))), Some("13")).is_some());
            assert!(skip_reason(&request(kind, None), Some("13")).is_some());
        }
        assert!(skip_reason(&request(RequestType::Delete, Some(&arn("13"))), Some("13")).is_some());
    }

    #[test]
    fn answers_go_only_to_cloudformations_response_bucket_or_loopback_in_debug_builds() {
        for (allowed, region) in [
            ("https://cloudformation-custom-resource-response-euwest1.s3-eu-west-1.amazonaws.com/x?sig=1", "eu-west-1"),
            ("https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/arn%3Aaws?sig=1", "us-east-1"),
            ("https://cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com/x", "eu-west-1"),
            ("https://cloudformation-custom-resource-response-cnnorth1.s3.cn-north-1.amazonaws.com.cn/x", "cn-north-1"),
            ("https://s3.amazonaws.com/cloudformation-custom-resource-response-useast1/x", "us-east-1"),
        ] {
            assert!(is_cloudformation_url(allowed, Some(region)), "{allowed}");
        }
        // Another region's bucket (anyone may create one named so where it does not exist, or a
        // look-alike): not this stack's answer.
        for (refused, region) in [
            (
                "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
                "eu-west-1",
            ),
            (
                "https://cloudformation-custom-resource-response-euwest1x.s3.amazonaws.com/x",
                "eu-west-1",
            ),
            (
                "https://s3.amazonaws.com/cloudformation-custom-resource-response-uswest2/x",
                "us-east-1",
            ),
            (
                "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
                "",
            ),
        ] {
            assert!(
                !is_cloudformation_url(refused, Some(region)),
                "{refused} in {region}"
            );
        }
        assert!(!is_cloudformation_url(
            "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
            None
        ));
        for refused in [
            "http://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
            "https://s3.amazonaws.com/bucket/key",
            "https://attacker-bucket.s3.amazonaws.com/key",
            "https://s3.cn-north-1.amazonaws.com.cn/bucket/key",
            "https://cloudformation-custom-resource-response-useast1.execute-api.amazonaws.com/x",
            "https://evil.example.com/collect",
            "https://amazonaws.com.evil.example/x",
            "https://notamazonaws.com/x",
            "https://s3.amazonaws.com@evil.example/x",
            "https://user@cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
            "file:///etc/passwd",
        ] {
            assert!(
                !is_cloudformation_url(refused, Some("us-east-1")),
                "{refused}"
            );
        }
        // Tests are debug builds, where loopback stands in for S3; a release build refuses it.
        assert_eq!(
            is_cloudformation_url("http://127.0.0.1:4000/answer", Some("us-east-1")),
            cfg!(debug_assertions)
        );
    }

    #[test]
    fn long_reasons_are_cut_on_a_char_boundary() {
        let cut = truncate("é".repeat(2000));
        assert!(cut.len() <= 1024 + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
