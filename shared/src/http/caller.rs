//! Who sent a request, as API Gateway's authorizer established it. `Idempotency-Key`s are
//! unique per caller (IETF httpapi draft: a key identifies one client's request), so two
//! services that happen to pick the same key never see each other's tickets.

use axum::{
    extract::FromRequestParts,
    http::{request::Parts, Extensions},
};
use lambda_http::request::RequestContext;
use sha2::{Digest, Sha256};

use super::Problem;

/// The authenticated principal, or anonymous: only local `triage serve`, where no API Gateway
/// stands in front. A request that came through API Gateway names its principal, or is a 401.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(Option<String>);

impl Caller {
    pub const ANONYMOUS: Caller = Caller(None);

    /// From the request context lambda_http attaches to each request:
    /// - IAM (SigV4): the user ARN, with an assumed role's session name dropped, so a
    ///   service's retry after its credentials were refreshed is still the same caller;
    /// - JWT: issuer and subject.
    ///
    /// Without a principal (a route deployed without an authorizer, a JWT without `sub`) the
    /// request is refused: its `Idempotency-Key`s would be shared with every such caller.
    pub fn from_extensions(extensions: &Extensions) -> Result<Self, Problem> {
        match extensions.get::<RequestContext>() {
            None => Ok(Self::ANONYMOUS),
            Some(RequestContext::ApiGatewayV2(context)) => context
                .authorizer
                .as_ref()
                .and_then(principal)
                .map(|p| Caller(Some(p)))
                .ok_or_else(unauthenticated),
            Some(_) => Err(unauthenticated()),
        }
    }

    /// The stored form of `key` for this caller. Anonymous keys are stored as sent; a caller's
    /// are prefixed with a digest of the principal, which keeps rows short (an ARN can be long)
    /// and needs no schema change, so a rolled-back release still reads the table.
    pub fn scope(&self, key: &str) -> String {
        match self.owner() {
            None => key.to_string(),
            Some(owner) => format!("{owner}/{key}"),
        }
    }

    /// What tickets and subscriptions store as their owner: the digest `scope` prefixes keys
    /// with; `None` for anonymous (local) callers.
    pub fn owner(&self) -> Option<String> {
        self.0.as_ref().map(|principal| {
            let digest = Sha256::digest(principal.as_bytes());
            hex::encode(&digest[..16])
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        Self::from_extensions(&parts.extensions)
    }
}

fn principal(
    authorizer: &lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizer,
) -> Option<String> {
    if let Some(arn) = authorizer
        .iam
        .as_ref()
        .and_then(|iam| iam.user_arn.as_deref())
    {
        return Some(format!("iam {}", without_session(arn)));
    }
    let claims = &authorizer.jwt.as_ref()?.claims;
    let subject = claims.get("sub")?;
    let issuer = claims.get("iss").map_or("", String::as_str);
    Some(format!("jwt {issuer} {subject}"))
}

fn unauthenticated() -> Problem {
    Problem::new(
        axum::http::StatusCode::UNAUTHORIZED,
        "the request names no authenticated principal (an IAM caller, or a JWT with `sub`)",
    )
}

/// `arn:aws:sts::123456789012:assumed-role/Role/session` → `…:assumed-role/Role`.
fn without_session(arn: &str) -> &str {
    match arn.split_once(":assumed-role/") {
        Some((_, role_and_session)) if role_and_session.contains('/') => {
            &arn[..arn.rfind('/').unwrap_or(arn.len())]
        }
        _ => arn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assumed_role_is_one_caller_whatever_its_session() {
        assert_eq!(
            without_session("arn:aws:sts::123456789012:assumed-role/ticketing/i-0abc"),
            "arn:aws:sts::123456789012:assumed-role/ticketing"
        );
        assert_eq!(
            without_session("arn:aws:iam::123456789012:user/path/alice"),
            "arn:aws:iam::123456789012:user/path/alice"
        );
    }

    #[test]
    fn anonymous_keys_are_stored_as_sent_and_callers_keys_apart() {
        let alice = Caller(Some("iam arn:aws:iam::1:user/alice".into()));
        let bob = Caller(Some("iam arn:aws:iam::1:user/bob".into()));
        assert_eq!(Caller::ANONYMOUS.scope("k1"), "k1");
        assert_ne!(alice.scope("k1"), bob.scope("k1"));
        assert_eq!(alice.scope("k1"), alice.scope("k1"));
        assert!(alice.scope("k1").ends_with("/k1"));
    }
}
