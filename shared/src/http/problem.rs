//! RFC 9457 problem details: every error the API returns has this shape.

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use serde_json::json;

use crate::domain::error::Error;

#[derive(Debug, Clone)]
pub struct Problem {
    pub status: StatusCode,
    pub detail: String,
    /// `Retry-After` for a 429 (a 503 always says 5 s).
    pub retry_after: Option<std::time::Duration>,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
            retry_after: None,
        }
    }
    pub fn retry_after(self, after: std::time::Duration) -> Self {
        Self {
            retry_after: Some(after),
            ..self
        }
    }
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }
    pub fn unprocessable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = json!({
            "type": "about:blank",
            "title": self.status.canonical_reason().unwrap_or("Error"),
            "status": self.status.as_u16(),
            "detail": self.detail,
        });
        let mut response = (self.status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(after) = self.retry_after {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(after.as_secs().max(1)),
            );
        } else if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

impl From<Error> for Problem {
    fn from(err: Error) -> Self {
        match &err {
            Error::InvalidRequest(invalid) => Problem::bad_request(invalid.to_string()),
            err if err.is_unavailable() => {
                tracing::warn!(error = %err.report(), "database unavailable");
                Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the ticket store is temporarily unavailable; retry later",
                )
            }
            err => {
                tracing::error!(error = %err.report(), "request failed");
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            }
        }
    }
}
