//! The audit trail of operator commands (`operation_audit`): every run, from the CLI or the
//! ops Lambda, whatever its end, is one row naming who ran it, what, with which parameters,
//! and what it did. The row is written `started` before the operation runs (no trail, no
//! run), and finished once after it; the table is append-only for every login (a trigger,
//! V8), and the server sets `db_login` and the times. `triage audit` lists them.
//!
//! Who: the CLI records the OS user its environment names (`$USER`: self-declared) with the
//! process's real uid, and the row keeps the database login, set by the server; the ops
//! Lambda records its own function and the request id, because Lambda does not tell a function
//! which IAM principal invoked it (CloudTrail does: the `Invoke` data event with that request
//! id names the caller).

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use serde_json::Value;

use crate::{
    db,
    domain::error::{Error, Result},
};

/// Who runs an operation, as recorded, and where it runs: the ops Lambda, with the memory it
/// was given, is held to what its function can do (`operations::fits`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    who: String,
    lambda: Option<LambdaHost>,
}

/// The ops Lambda's function, as its invocation's context tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LambdaHost {
    /// The function's memory, in MB (`None`: not told, the template's 256 is assumed).
    pub memory_mb: Option<u32>,
}

impl Operator {
    /// The CLI: the OS user (`$USER`, else `$LOGNAME`, as claimed), the process's real uid
    /// (from the kernel, where it says: `/proc/self`), and the host.
    pub fn os_user() -> Self {
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_else(|_| "unknown".into());
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown-host".into());
        let uid = process_uid().map_or_else(|| "unknown".to_string(), |uid| uid.to_string());
        Self {
            who: format!("os-user {user}@{host} uid {uid}"),
            lambda: None,
        }
    }

    /// The operator console (`triage serve`): the OS user who runs the server, through the
    /// console. With `--allow-remote-admin` that is whoever holds the console's token.
    pub fn console() -> Self {
        Self {
            who: format!("console, {}", Self::os_user().who),
            lambda: None,
        }
    }

    /// The ops Lambda: the function and the invocation (see the module for why not the caller).
    pub fn lambda(function_arn: &str, request_id: &str) -> Self {
        Self {
            who: format!("lambda {function_arn} request {request_id}"),
            lambda: Some(LambdaHost { memory_mb: None }),
        }
    }

    /// The ops Lambda's memory, from its invocation's context (`env_config.memory`).
    pub fn with_memory_mb(mut self, memory_mb: u32) -> Self {
        if let Some(host) = &mut self.lambda {
            host.memory_mb = Some(memory_mb);
        }
        self
    }

    /// `Some` in the ops Lambda: no local files, and work bounded by its memory.
    pub fn lambda_host(&self) -> Option<LambdaHost> {
        self.lambda
    }

    pub fn as_str(&self) -> &str {
        &self.who
    }
}

/// One row of the trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    pub at: DateTime<Utc>,
    pub principal: String,
    /// The database login that ran it, as the server saw it.
    pub db_login: String,
    pub op: String,
    pub parameters: Value,
    pub status: String,
    pub result: Option<Value>,
    pub error: Option<String>,
}

#[cfg(unix)]
fn process_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

#[cfg(not(unix))]
fn process_uid() -> Option<u32> {
    None
}

/// A run whose row is written and not yet finished.
#[derive(Debug)]
pub struct Started(i64);

const START: &str = r#"
INSERT INTO operation_audit (principal, op, parameters, status)
VALUES ($1, $2, $3, 'started')
RETURNING id
"#;

/// Writes the `started` row of a run before it does anything.
pub async fn start(
    pool: &Pool,
    operator: &Operator,
    op: &str,
    parameters: &Value,
) -> Result<Started> {
    let client = db::client(pool).await?;
    let row = client
        .query_one(START, &[&operator.as_str(), &op, parameters])
        .await?;
    Ok(Started(row.get(0)))
}

const FINISH: &str = r#"
UPDATE operation_audit SET status = $2, result = $3, error = $4
WHERE id = $1 AND status = 'started'
"#;

/// Finishes the row: `result` is what the run reported, or why it did not finish.
pub async fn finish(
    pool: &Pool,
    started: Started,
    result: std::result::Result<Option<Value>, &Error>,
) -> Result<()> {
    let (status, result, error) = match result {
        Ok(report) => ("ok", report, None),
        Err(e @ Error::InvalidRequest(_)) => ("refused", None, Some(e.to_string())),
        Err(e) => ("failed", None, Some(e.to_string())),
    };
    let client = db::client(pool).await?;
    client
        .execute(FINISH, &[&started.0, &status, &result, &error])
        .await?;
    Ok(())
}

const LIST: &str = r#"
SELECT at, principal, db_login, op, parameters, status, result, error
FROM operation_audit ORDER BY at DESC, id DESC LIMIT $1
"#;

/// The newest `limit` rows.
pub async fn list(pool: &Pool, limit: i64) -> Result<Vec<AuditEntry>> {
    let client = db::client(pool).await?;
    Ok(client
        .query(LIST, &[&limit])
        .await?
        .into_iter()
        .map(|row| AuditEntry {
            at: row.get(0),
            principal: row.get(1),
            db_login: row.get(2),
            op: row.get(3),
            parameters: row.get(4),
            status: row.get(5),
            result: row.get(6),
            error: row.get(7),
        })
        .collect())
}
