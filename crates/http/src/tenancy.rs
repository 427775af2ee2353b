//! Membership first: every request under `/v2/accounts/{accountId}` proves the caller's
//! membership of that account before any handler runs.
//!
//! Actix polls a handler's extractors concurrently, so an extractor cannot promise to run
//! before the body extractor; a middleware can. [`require_membership`] authenticates the
//! token, parses `{accountId}` and checks membership; only then does the request reach
//! routing and extractors, which find the proof as [`Membership`]. A non-member, an
//! unknown account, an account outside the token's pins and a malformed id all get the
//! same 401, whatever the method, body, content type or query. The token's scope is
//! checked here too, after membership and before any body: 403 for a route its scope
//! does not allow (the table is the domain's `token::SENDING_ROUTES`).
//!
//! Every decision here reads the path the router matches ([`routed_path`]), never the raw
//! one: actix routes `/v2/%61ccounts` as `/v2/accounts`, so a check on the raw path would
//! let an encoded path reach a route unchecked (docs/api-decisions.md, "Paths").

use std::future::{ready, Ready};

use actix_web::{
    body::{EitherBody, MessageBody},
    dev::{Payload, ServiceRequest, ServiceResponse},
    middleware::Next,
    FromRequest, HttpMessage, HttpRequest, ResponseError,
};
use mailroom_app::auth::{authorize_caller, verify_membership, Member, RouteCall};
use mailroom_domain::AccountId;

use crate::{
    blocking::run_blocking,
    extract::{authenticate_request, services_of, Caller},
    problem::ApiError,
};

/// The path prefix of account-scoped routes; the next segment is `{accountId}`.
const ACCOUNT_PREFIX: &str = "/v2/accounts/";

/// The caller's proven membership of the account in the path, for handlers of account
/// routes.
#[derive(Debug, Clone, Copy)]
pub struct Membership(pub Member);

impl FromRequest for Membership {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        ready(
            req.extensions()
                .get::<Member>()
                .copied()
                .map(Self)
                // Fail closed: a request that reached an account handler without the
                // middleware's proof is refused like a non-member, never served.
                .ok_or_else(ApiError::unauthorized),
        )
    }
}

/// The path as the router matches it: percent-encoded characters other than `/`, `%`
/// and `+` decoded. The middleware's checks and the route table must see the same path.
pub(crate) fn routed_path(req: &HttpRequest) -> &str {
    req.match_info().as_str()
}

/// Whether `path` is one of the authenticated routes outside an account: the caller's
/// tokens and accounts. Its caller is authenticated here too, so a bad token is a 401
/// before the body is looked at on these routes as well.
fn is_caller_scoped(path: &str) -> bool {
    path == "/v2/accounts" || path.starts_with("/v2/users/")
}

/// The `{accountId}` segment of an account-scoped path, if `path` is one.
fn account_segment(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(ACCOUNT_PREFIX)?;
    let segment = rest.split('/').next().unwrap_or_default();
    (!segment.is_empty()).then_some(segment)
}

async fn prove_membership(req: &HttpRequest, segment: &str) -> Result<Member, ApiError> {
    let actor = authenticate_request(req).await?;
    // A malformed id cannot name an account the caller belongs to: 401 like an unknown one.
    let account = AccountId::parse(segment).map_err(|_| ApiError::unauthorized())?;
    let services = services_of(req)?;
    let (method, path, query) = (
        req.method().as_str().to_owned(),
        routed_path(req).to_owned(),
        req.query_string().to_owned(),
    );
    run_blocking(move || {
        let call = RouteCall {
            method: &method,
            path: &path,
            query: &query,
        };
        verify_membership(&services, &actor, account, call)
    })
    .await
}

/// Authenticates the caller of a route outside an account and checks that the token's
/// scope allows the route.
///
/// # Errors
/// 401 or 429 as [`authenticate_request`]; 403 when the scope does not allow the route.
pub(crate) async fn authenticate_caller(req: &HttpRequest) -> Result<Caller, ApiError> {
    let actor = authenticate_request(req).await?;
    let call = RouteCall {
        method: req.method().as_str(),
        path: routed_path(req),
        query: req.query_string(),
    };
    authorize_caller(&actor, call)?;
    Ok(Caller(actor))
}

/// The middleware: for an account-scoped path, answers 401 (or 429) unless the caller is
/// a member through a token that may reach the account, 403 when the token's scope does
/// not allow the route, and otherwise stores the [`Member`] for the handler; for the
/// tokens and accounts routes, answers 401 (or 429) unless the caller is authenticated,
/// 403 when its scope does not allow the route, and otherwise stores the [`Caller`].
/// Other paths pass.
///
/// # Errors
/// Only the inner service's errors; refusals are responses.
pub async fn require_membership(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let path = routed_path(req.request()).to_owned();
    let Some(segment) = account_segment(&path).map(str::to_owned) else {
        if is_caller_scoped(&path) {
            match authenticate_caller(req.request()).await {
                Ok(caller) => {
                    req.extensions_mut().insert(caller);
                }
                Err(error) => {
                    return Ok(req
                        .into_response(error.error_response())
                        .map_into_right_body())
                }
            }
        }
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_left_body);
    };
    match prove_membership(req.request(), &segment).await {
        Ok(member) => {
            req.extensions_mut().insert(member);
            next.call(req)
                .await
                .map(ServiceResponse::map_into_left_body)
        }
        Err(error) => Ok(req
            .into_response(error.error_response())
            .map_into_right_body()),
    }
}

#[cfg(test)]
mod tests {
    use super::{account_segment, is_caller_scoped};

    #[test]
    fn finds_the_account_segment_of_account_paths_only() {
        assert_eq!(account_segment("/v2/accounts/abc"), Some("abc"));
        assert_eq!(account_segment("/v2/accounts/abc/templates/x"), Some("abc"));
        assert_eq!(account_segment("/v2/accounts"), None);
        assert_eq!(account_segment("/v2/accounts/"), None);
        assert_eq!(account_segment("/v2/users/me/tokens"), None);
        assert!(is_caller_scoped("/v2/accounts"));
        assert!(is_caller_scoped("/v2/users/me/tokens/x"));
        assert!(!is_caller_scoped("/v2/openapi.json"));
    }
}
