//! The audit trail of operator commands (`operation_audit`): every run, from the CLI or the
//! ops Lambda, whatever its end, is one row naming who ran it, what, with which parameters,
//! and what it did. `triage audit` lists them.
//!
//! Who: the CLI records the OS user its environment names (`$USER`: self-declared, so the
//! row also keeps the database login, set by the server); the ops Lambda records its own function and
//! the request id, because Lambda does not tell a function which IAM principal invoked it
//! (CloudTrail does: the `Invoke` data event with that request id names the caller).

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use serde::Serialize;
use serde_json::Value;

use crate::{
    db,
    domain::error::{Error, Result},
};

/// Who runs an operation, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator(String);

impl Operator {
    /// The CLI: the OS user (`$USER`, else `$LOGNAME`) and the host.
    pub fn os_user() -> Self {
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_else(|_| "unknown".into());
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown-host".into());
        Self(format!("os-user {user}@{host}"))
    }

    /// The operator console (`triage serve`): the OS user who runs the server, through the
    /// console. With `--allow-remote-admin` that is whoever holds the console's token.
    pub fn console() -> Self {
        Self(format!("console, {}", Self::os_user().0))
    }

    /// The ops Lambda: the function and the invocation (see the module for why not the caller).
    pub fn lambda(function_arn: &str, request_id: &str) -> Self {
        Self(format!("lambda {function_arn} request {request_id}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
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

const RECORD: &str = r#"
INSERT INTO operation_audit (principal, op, parameters, status, result, error)
VALUES ($1, $2, $3, $4, $5, $6)
"#;

/// Records one run: `result` is what it reported, or why it did not finish.
pub async fn record(
    pool: &Pool,
    operator: &Operator,
    op: &str,
    parameters: &Value,
    result: std::result::Result<Option<Value>, &Error>,
) -> Result<()> {
    let (status, result, error) = match result {
        Ok(report) => ("ok", report, None),
        Err(e @ Error::InvalidRequest(_)) => ("refused", None, Some(e.to_string())),
        Err(e) => ("failed", None, Some(e.to_string())),
    };
    let client = db::client(pool).await?;
    client
        .execute(
            RECORD,
            &[
                &operator.as_str(),
                &op,
                parameters,
                &status,
                &result,
                &error,
            ],
        )
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
