//! Typed errors shared by every layer. What a provider failure *means* for the outbox (its
//! class) is decided in `providers::failure`; these types only carry it.

use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Anything, from anywhere, that can end up as a boxed cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The environment (or what it points at) is wrong: a deployment mistake, named by its
/// variable.
#[derive(Debug, Error)]
#[error("configuration: {name}: {reason}")]
pub struct ConfigError {
    pub name: String,
    pub reason: String,
}

impl ConfigError {
    pub fn invalid(name: &str, reason: String) -> Self {
        Self {
            name: name.to_string(),
            reason,
        }
    }
}

/// An operator's request is wrong (a flag, an ops payload field): answered as a 400 / Lambda
/// error type `InvalidRequest`, never blamed on the deployment.
#[derive(Debug, Error)]
#[error("{field}: {reason}")]
pub struct InvalidRequest {
    pub field: String,
    pub reason: String,
}

impl InvalidRequest {
    pub fn new(field: &str, reason: String) -> Self {
        Self {
            field: field.to_string(),
            reason,
        }
    }
}

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("invalid request: {0}")]
    InvalidRequest(#[from] InvalidRequest),
    /// A dependency (the database, Secrets Manager) could not be reached in time: callers
    /// answer 503 / retry later.
    #[error("{what} unavailable: {}", with_causes(&**source))]
    Unavailable {
        what: &'static str,
        #[source]
        source: BoxError,
    },
    #[error("database: {0}")]
    Database(#[from] tokio_postgres::Error),
    #[error("migration: {0}")]
    Migration(#[from] refinery::Error),
}

impl Error {
    pub fn unavailable(what: &'static str, source: impl Into<BoxError>) -> Self {
        Error::Unavailable {
            what,
            source: source.into(),
        }
    }

    /// Whether the failure is a dependency being away (connection refused, timed out,
    /// closed), as opposed to a statement being wrong.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Unavailable { .. } => true,
            Error::Database(e) => match e.as_db_error() {
                Some(db) => is_unavailable_code(db),
                None => e.is_closed() || !is_conversion(e),
            },
            _ => false,
        }
    }

    /// The message with its causes, for logs and operators.
    pub fn report(&self) -> String {
        with_causes(self)
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(err: deadpool_postgres::PoolError) -> Self {
        match err {
            deadpool_postgres::PoolError::Backend(e)
                if !e.is_closed() && e.as_db_error().is_some() =>
            {
                Error::Database(e)
            }
            other => Error::unavailable("database", other),
        }
    }
}

/// An error's message followed by its causes: tokio-postgres keeps the useful part ("server
/// does not support TLS", "certificate verify failed") in the source, not in the message.
pub fn with_causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

/// A value that does not convert between Rust and SQL (a parameter or a column of the wrong
/// type): a bug in a statement, not the database being away. tokio-postgres gives such an
/// error the conversion's own error as its source; the connection's failures have an I/O
/// error or none.
fn is_conversion(e: &tokio_postgres::Error) -> bool {
    use std::error::Error as _;
    e.source()
        .is_some_and(|source| source.downcast_ref::<std::io::Error>().is_none())
}

fn is_unavailable_code(db: &tokio_postgres::error::DbError) -> bool {
    use tokio_postgres::error::SqlState;
    let code = db.code();
    // Class 08 (connection), 57P0x (shutdown), 53 (resources), statement timeout, and 28
    // (login refused): during a rotation the password changes before the secret does, so a
    // refused login is the database being unreachable for now (503, retry), not a bug (500).
    code.code().starts_with("08")
        || code.code().starts_with("28")
        || code.code().starts_with("57P")
        || code.code().starts_with("53")
        || *code == SqlState::QUERY_CANCELED
}

/// What the Lambda runtime reports for a failed invocation: the class as `errorType`, so an
/// alarm can tell "database away" from a bad request from a bug.
impl From<Error> for lambda_runtime::Diagnostic {
    fn from(err: Error) -> Self {
        let error_type = match &err {
            Error::Config(_) => "Config",
            Error::InvalidRequest(_) => "InvalidRequest",
            e if e.is_unavailable() => "Unavailable",
            Error::Migration(_) => "Migration",
            _ => "Database",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            error_message: err.report(),
        }
    }
}
