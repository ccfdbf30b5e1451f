//! The batch objects each API returns, with their times.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{FakeBatch, LineEnd};
use crate::Api;

/// The batch object each API returns.
pub(super) fn describe(batch: &FakeBatch, host: &str) -> Value {
    let ends = batch.ended.as_deref().unwrap_or_default();
    let count = |wanted: fn(&LineEnd) -> bool| ends.iter().filter(|e| wanted(e)).count();
    let succeeded = count(|e| matches!(e, LineEnd::Replied { status: 200, .. }));
    let errored = count(|e| matches!(e, LineEnd::Replied { status, .. } if *status != 200));
    let expired = count(|e| matches!(e, LineEnd::Expired));
    let cancelled = count(|e| matches!(e, LineEnd::Cancelled));
    let ended_at = batch.ended.as_ref().map(|_| unix_now());
    let expires_at = batch.created_unix + 24 * 3600;
    match batch.api {
        Api::OpenAi => {
            let status = match (&batch.ended, batch.cancelled) {
                (None, true) => "cancelling",
                (None, false) => "in_progress",
                (Some(_), true) => "cancelled",
                (Some(_), false) if expired > 0 => "expired",
                (Some(_), false) => "completed",
            };
            let at = |when: &str| {
                if status == when {
                    json!(ended_at)
                } else {
                    Value::Null
                }
            };
            json!({
                "id": batch.id,
                "object": "batch",
                "endpoint": "/v1/chat/completions",
                "errors": null,
                "input_file_id": batch.input_file_id,
                "completion_window": "24h",
                "status": status,
                "output_file_id": batch.output_file_id,
                "error_file_id": batch.error_file_id,
                "created_at": batch.created_unix,
                "in_progress_at": batch.created_unix,
                "expires_at": expires_at,
                "finalizing_at": ended_at,
                "completed_at": at("completed"),
                "failed_at": null,
                "expired_at": at("expired"),
                "cancelling_at": batch.cancelled.then_some(batch.created_unix),
                "cancelled_at": at("cancelled"),
                "request_counts": {
                    "total": batch.lines.len(),
                    "completed": succeeded,
                    "failed": errored + expired + cancelled,
                },
                "metadata": batch.metadata,
            })
        }
        Api::Anthropic => {
            let status = match (&batch.ended, batch.cancelled) {
                (Some(_), _) => "ended",
                (None, true) => "canceling",
                (None, false) => "in_progress",
            };
            let processing = if batch.ended.is_some() {
                0
            } else {
                batch.lines.len()
            };
            json!({
                "id": batch.id,
                "type": "message_batch",
                "processing_status": status,
                "request_counts": {
                    "processing": processing,
                    "succeeded": succeeded,
                    "errored": errored,
                    "canceled": cancelled,
                    "expired": expired,
                },
                "ended_at": ended_at.map(rfc3339),
                "created_at": rfc3339(batch.created_unix),
                "expires_at": rfc3339(expires_at),
                "archived_at": null,
                "cancel_initiated_at": batch.cancelled.then(|| rfc3339(batch.created_unix)),
                "results_url": batch.ended.as_ref().map(|_| format!("http://{host}/v1/messages/batches/{}/results", batch.id)),
            })
        }
    }
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// Seconds since the epoch as RFC 3339 (UTC), as Anthropic writes its times.
fn rfc3339(secs: u64) -> String {
    // Howard Hinnant's civil-from-days.
    let z = (secs / 86_400) as i64 + 719_468;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_rfc_3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_083_199), "2026-11-30T23:59:59Z");
    }
}
