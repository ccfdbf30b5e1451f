//! Who sent a request, as API Gateway's authorizer established it. `Idempotency-Key`s are
//! unique per caller (IETF httpapi draft: a key identifies one client's request), so two
//! services that happen to pick the same key never see each other's tickets; and a ticket is
//! read by the caller that created it (or one with [`READ_ALL_SCOPE`]), no one else.

use axum::{
    extract::FromRequestParts,
    http::{request::Parts, Extensions},
};
use lambda_http::request::RequestContext;

use super::Problem;
use crate::pipeline::ingest::{self, Submitter};

/// The JWT scope that lets a support tool read every ticket, not only its own (the route's own
/// read scope is still needed to reach it).
pub const READ_ALL_SCOPE: &str = "triage/tickets.read_all";
/// The JWT scopes of a caller's webhook subscriptions: creating, deleting and rotating them
/// (an `include_text` webhook reads the caller's tickets), and listing them (write lists too).
pub const SUBSCRIPTIONS_WRITE_SCOPE: &str = "triage/subscriptions.write";
pub const SUBSCRIPTIONS_READ_SCOPE: &str = "triage/subscriptions.read";
/// The JWT scope of the help desk's feedback on a ticket (`POST /tickets/{id}/feedback`).
pub const FEEDBACK_SCOPE: &str = "triage/feedback.write";
/// The JWT scope of a labeller: the desk's tool, whose feedback trains the classifier every
/// caller gets and judges versions (docs/labelling.md). Without it (or a place in
/// `TRIAGE_LABELLERS`), feedback is stored but counts for nothing beyond the caller's ticket.
pub const LABEL_SCOPE: &str = "triage/label";

/// The authenticated principal, or the local server's caller. A request that came through API
/// Gateway names its principal, or is a 401.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `None`: the local server's caller.
    principal: Option<String>,
    read_all: bool,
    /// The JWT's scopes; `None` for IAM callers (their policy on the route decides) and the
    /// local server's (its guard decides).
    scopes: Option<Vec<String>>,
}

/// What a subscription route needs of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionAccess {
    Read,
    Write,
}

impl Caller {
    pub const LOCAL: Caller = Caller {
        principal: None,
        read_all: false,
        scopes: None,
    };

    /// Refuses a JWT caller without the subscriptions scope `access` needs (403). Checked here
    /// as well as on the template's routes: a route deployed without its scopes (or reached
    /// through `$default`) must not open subscriptions to any token of the audience.
    pub fn may_use_subscriptions(&self, access: SubscriptionAccess) -> Result<(), Problem> {
        let Some(scopes) = &self.scopes else {
            return Ok(());
        };
        let has = |scope: &str| scopes.iter().any(|s| s == scope);
        let allowed = match access {
            SubscriptionAccess::Write => has(SUBSCRIPTIONS_WRITE_SCOPE),
            SubscriptionAccess::Read => {
                has(SUBSCRIPTIONS_READ_SCOPE) || has(SUBSCRIPTIONS_WRITE_SCOPE)
            }
        };
        if allowed {
            return Ok(());
        }
        let needed = match access {
            SubscriptionAccess::Write => SUBSCRIPTIONS_WRITE_SCOPE.to_string(),
            SubscriptionAccess::Read => {
                format!("{SUBSCRIPTIONS_READ_SCOPE} or {SUBSCRIPTIONS_WRITE_SCOPE}")
            }
        };
        Err(Problem::new(
            axum::http::StatusCode::FORBIDDEN,
            format!("this token lacks the scope {needed}"),
        ))
    }

    /// Refuses a JWT caller without [`FEEDBACK_SCOPE`] (403), on the route and here alike.
    pub fn may_give_feedback(&self) -> Result<(), Problem> {
        match &self.scopes {
            Some(scopes) if !scopes.iter().any(|s| s == FEEDBACK_SCOPE) => Err(Problem::new(
                axum::http::StatusCode::FORBIDDEN,
                format!("this token lacks the scope {FEEDBACK_SCOPE}"),
            )),
            _ => Ok(()),
        }
    }

    /// Whether this caller's feedback is the desk's (docs/labelling.md): a JWT with
    /// [`LABEL_SCOPE`], a principal in `labellers` (`TRIAGE_LABELLERS`: an IAM caller's ARN
    /// as [`Caller::from_extensions`] keeps it, a JWT's `ISSUER SUBJECT`), or the local
    /// server's caller (one owner, whose guard decides).
    pub fn may_label(&self, labellers: &[String]) -> bool {
        let Some(principal) = &self.principal else {
            return true;
        };
        if self
            .scopes
            .as_ref()
            .is_some_and(|scopes| scopes.iter().any(|s| s == LABEL_SCOPE))
        {
            return true;
        }
        let named = principal
            .strip_prefix("iam ")
            .or_else(|| principal.strip_prefix("jwt "))
            .unwrap_or(principal);
        labellers.iter().any(|l| l == named)
    }

    /// From the request context lambda_http attaches to each request:
    /// - IAM (SigV4): the user ARN, with an assumed role's session name dropped, so a
    ///   service's retry after its credentials were refreshed is still the same caller;
    /// - JWT: issuer and subject; [`READ_ALL_SCOPE`] among its scopes reads every ticket.
    ///
    /// Without a principal (a route deployed without an authorizer, a JWT without `sub`) the
    /// request is refused: its `Idempotency-Key`s and tickets would be shared with every such
    /// caller.
    pub fn from_extensions(extensions: &Extensions) -> Result<Self, Problem> {
        match extensions.get::<RequestContext>() {
            None => Ok(Self::LOCAL),
            Some(RequestContext::ApiGatewayV2(context)) => {
                let authorizer = context.authorizer.as_ref().ok_or_else(unauthenticated)?;
                let principal = principal(authorizer).ok_or_else(unauthenticated)?;
                Ok(Caller {
                    principal: Some(principal),
                    read_all: has_scope(authorizer, READ_ALL_SCOPE),
                    scopes: jwt_scopes(authorizer),
                })
            }
            Some(_) => Err(unauthenticated()),
        }
    }

    /// Who owns what this caller creates, as stored on the ticket: a digest of the principal
    /// (32 hex digits: rows stay short however long an ARN is, and the principal itself is not
    /// copied into every ticket), or `local`.
    pub fn owner(&self) -> String {
        match &self.principal {
            None => Submitter::LOCAL.owner.to_string(),
            Some(principal) => ingest::owner_of(principal),
        }
    }

    /// Whose tickets this caller may read: its own, or (`None`) all of them.
    pub fn reads(&self) -> Option<String> {
        (!self.read_all).then(|| self.owner())
    }

    /// The stored form of `key` for this caller: its owner, a slash, the key. Owners differ in
    /// form (32 hex digits, or `local`), so no caller's stored form can equal another's.
    pub fn scope(&self, key: &str) -> String {
        format!("{}/{key}", self.owner())
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

/// The token's scopes: in `scopes` (API Gateway fills it for routes with authorization scopes)
/// and in the space-separated `scope` claim (`scp` for some issuers). `None` without a JWT.
fn jwt_scopes(
    authorizer: &lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizer,
) -> Option<Vec<String>> {
    let jwt = authorizer.jwt.as_ref()?;
    let listed = jwt.scopes.iter().flatten().cloned();
    let claimed = ["scope", "scp"]
        .iter()
        .filter_map(|name| jwt.claims.get(*name))
        .flat_map(|v| {
            v.split([' ', ','])
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
        .collect::<Vec<_>>();
    Some(listed.chain(claimed).collect())
}

/// Whether the token carries `scope`.
fn has_scope(
    authorizer: &lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizer,
    scope: &str,
) -> bool {
    jwt_scopes(authorizer).is_some_and(|scopes| scopes.iter().any(|s| s == scope))
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
    fn every_callers_keys_are_apart_and_the_local_callers_too() {
        let named = |p: &str| Caller {
            principal: Some(p.into()),
            read_all: false,
            scopes: None,
        };
        let alice = named("iam arn:aws:iam::1:user/alice");
        let bob = named("iam arn:aws:iam::1:user/bob");
        assert_eq!(Caller::LOCAL.scope("k1"), "local/k1");
        assert_ne!(alice.scope("k1"), bob.scope("k1"));
        assert_eq!(alice.scope("k1"), alice.scope("k1"));
        assert_eq!(alice.scope("k1"), format!("{}/k1", alice.owner()));
        // A local key that looks like a principal's stored form stays apart from it.
        let forged = Caller::LOCAL.scope(&alice.scope("k1"));
        assert_ne!(forged, alice.scope("k1"));
        assert!(alice.owner().len() == 32 && alice.owner().bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn only_the_read_all_scope_reads_every_ticket() {
        let caller = Caller {
            principal: Some("jwt i s".into()),
            read_all: false,
            scopes: Some(Vec::new()),
        };
        assert_eq!(caller.reads(), Some(caller.owner()));
        let support = Caller {
            read_all: true,
            ..caller
        };
        assert_eq!(support.reads(), None);
        assert_eq!(Caller::LOCAL.reads().as_deref(), Some("local"));
    }

    #[test]
    fn only_listed_principals_the_label_scope_and_the_local_caller_may_label() {
        let listed = vec![
            "arn:aws:sts::1:assumed-role/desk".to_string(),
            "https://issuer.example agent-7".to_string(),
        ];
        let caller = |principal: &str, scopes: Option<&[&str]>| Caller {
            principal: Some(principal.into()),
            read_all: false,
            scopes: scopes.map(|s| s.iter().map(|s| s.to_string()).collect()),
        };
        let cases = [
            (caller("iam arn:aws:sts::1:assumed-role/desk", None), true),
            (caller("iam arn:aws:iam::1:user/tenant", None), false),
            (
                caller("jwt https://issuer.example agent-7", Some(&[])),
                true,
            ),
            (
                caller("jwt https://issuer.example tenant", Some(&[])),
                false,
            ),
            (
                caller("jwt https://issuer.example tenant", Some(&[FEEDBACK_SCOPE])),
                false,
            ),
            (
                caller("jwt https://issuer.example tenant", Some(&[LABEL_SCOPE])),
                true,
            ),
            // The list names principals, not their stored digests nor prefixed forms.
            (caller("iam desk", None), false),
            (Caller::LOCAL, true),
        ];
        for (caller, may) in cases {
            assert_eq!(caller.may_label(&listed), may, "{caller:?}");
        }
        assert!(!caller("iam arn:aws:iam::1:user/tenant", None).may_label(&[]));
    }

    #[test]
    fn a_jwt_uses_subscriptions_only_with_their_scope_and_iam_and_local_callers_by_their_guards() {
        let jwt = |scopes: &[&str]| Caller {
            principal: Some("jwt i s".into()),
            read_all: false,
            scopes: Some(scopes.iter().map(|s| s.to_string()).collect()),
        };
        let (read, write) = (SubscriptionAccess::Read, SubscriptionAccess::Write);
        let cases = [
            (jwt(&[]), read, false),
            (jwt(&[]), write, false),
            (
                jwt(&["triage/tickets.write", "triage/tickets.read"]),
                write,
                false,
            ),
            (jwt(&[SUBSCRIPTIONS_READ_SCOPE]), read, true),
            (jwt(&[SUBSCRIPTIONS_READ_SCOPE]), write, false),
            (jwt(&[SUBSCRIPTIONS_WRITE_SCOPE]), read, true),
            (jwt(&[SUBSCRIPTIONS_WRITE_SCOPE]), write, true),
            (Caller::LOCAL, write, true),
        ];
        for (caller, access, allowed) in cases {
            let answer = caller.may_use_subscriptions(access);
            assert_eq!(answer.is_ok(), allowed, "{caller:?} {access:?}");
        }
    }
}
