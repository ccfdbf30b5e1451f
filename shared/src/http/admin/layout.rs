//! The page shell every console page shares, the error page, and value formatting.

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::{domain::error::Error, http::Problem};

const CSS: &str = include_str!("console.css");

/// Which navigation entry is the current page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Overview,
    DeadLetters,
    Versions,
    Quality,
    Ticket,
    SignIn,
    /// An error page: the navigation, with no entry current.
    Error,
}

const NAV: [(Section, &str, &str); 5] = [
    (Section::Overview, "/admin", "Overview"),
    (Section::DeadLetters, "/admin/dead-letters", "Dead letters"),
    (Section::Versions, "/admin/versions", "Versions"),
    (Section::Quality, "/admin/quality", "Quality"),
    (Section::Ticket, "/admin/tickets", "Ticket"),
];

pub fn page(section: Section, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · triage console" }
                style { (PreEscaped(CSS)) }
            }
            body {
                header {
                    strong { "triage console" }
                    @if section != Section::SignIn {
                        nav aria-label="Console" {
                            ul {
                                @for (s, href, label) in NAV {
                                    li {
                                        @if s == section {
                                            a href=(href) aria-current="page" { (label) }
                                        } @else {
                                            a href=(href) { (label) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

/// An HTML response the browser must not cache or show inside another site's frame.
pub fn html_response(status: StatusCode, markup: Markup) -> Response {
    let mut response = (status, markup).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    response
}

/// A failed console request, shown as a page that says what to do.
#[derive(Debug)]
pub struct PageError {
    pub status: StatusCode,
    pub detail: String,
}

impl PageError {
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            detail: detail.into(),
        }
    }
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            detail: detail.into(),
        }
    }
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            detail: detail.into(),
        }
    }
}

/// Same classification and logging as the API's problems (a database outage is a 503).
impl From<Error> for PageError {
    fn from(err: Error) -> Self {
        let problem = Problem::from(err);
        Self {
            status: problem.status,
            detail: problem.detail,
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let reason = self.status.canonical_reason().unwrap_or("Error");
        let body = html! {
            p.alert role="alert" { (self.detail) }
            p { a href="/admin" { "Back to the overview" } }
        };
        html_response(
            self.status,
            page(
                Section::Error,
                &format!("{} {reason}", self.status.as_u16()),
                body,
            ),
        )
    }
}

pub fn usd(value: f64) -> String {
    if value != 0.0 && value.abs() < 0.01 {
        format!("${value:.6}")
    } else {
        format!("${value:.2}")
    }
}

/// `95 s`, `12 min`, `3.5 h`: the scale a person reads an age in.
pub fn age(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

pub fn optional<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "—".to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_and_ages_read_at_a_human_scale() {
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(usd(0.000125), "$0.000125");
        assert_eq!(usd(12.345), "$12.35");
        assert_eq!(age(42.4), "42 s");
        assert_eq!(age(600.0), "10 min");
        assert_eq!(age(5400.0 * 2.0), "3.0 h");
    }
}
