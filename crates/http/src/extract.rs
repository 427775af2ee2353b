//! Request extractors shared by every route: the bearer-token caller, path ids, paging,
//! and the absent/null/value distinction of PATCH bodies.

use std::{future::Future, pin::Pin, time::Instant};

use actix_web::{dev::Payload, http::header, web, FromRequest, HttpMessage, HttpRequest};
use mailroom_app::{tokens::authenticate, Actor, Services};
use mailroom_domain::{paging::PageRequest, token::RawToken};

use crate::{
    auth_failures::{AuthFailureGuard, Verdict},
    blocking::run_blocking,
    problem::ApiError,
    rate_limit::{self, RateLimiter},
};

/// The authenticated caller. Extraction fails with 401 for a missing header, another
/// scheme, a value that is not a Mailroom token (refused without touching the database
/// thanks to its check digits), or an unknown, revoked or expired token; and with 429
/// when the token has used up its rate limit ([`crate::rate_limit`]).
#[derive(Debug, Clone)]
pub struct Caller(pub Actor);

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        // The tenancy middleware has authenticated the routes that take a caller; the
        // fallback keeps a route registered elsewhere from going unauthenticated or
        // beyond its token's scope.
        if let Some(caller) = req.extensions().get::<Self>().cloned() {
            return Box::pin(std::future::ready(Ok(caller)));
        }
        let req = req.clone();
        Box::pin(async move { crate::tenancy::authenticate_caller(&req).await })
    }
}

/// Authenticates the bearer token of `req` and charges the token's rate limit.
///
/// # Errors
/// 401 for a missing, malformed, unknown, revoked or expired token; 429 when the token has
/// used up its rate limit.
pub async fn authenticate_request(req: &HttpRequest) -> Result<Actor, ApiError> {
    let raw = bearer_token(req);
    let services = services_of(req)?;
    let limiter = req.app_data::<web::Data<RateLimiter>>().cloned();
    let raw = raw.ok_or_else(ApiError::unauthorized)?;
    let guard = req.app_data::<web::Data<AuthFailureGuard>>().cloned();
    let client = guard.as_ref().and_then(|guard| guard.client_key(req));
    let hash = raw.hash();
    if let Some(guard) = &guard {
        if let Verdict::Refuse(retry_after) = guard.before_lookup(client, &hash, Instant::now()) {
            return Err(ApiError::too_many_failed_authentications(retry_after));
        }
    }
    let actor = match run_blocking(move || authenticate(&services, &raw)).await {
        Ok(actor) => {
            if let Some(guard) = &guard {
                guard.succeeded(&hash, Instant::now());
            }
            actor
        }
        Err(error) => {
            let refusal = guard
                .filter(|_| error.status() == actix_web::http::StatusCode::UNAUTHORIZED)
                .and_then(|guard| guard.failed(client, Instant::now()));
            return Err(match refusal {
                Some(decision) => {
                    ApiError::too_many_failed_authentications(decision.retry_after_secs)
                }
                None => error,
            });
        }
    };
    if let Some(decision) =
        // A token-authenticated actor always has its token id.
        limiter.and_then(|limiter| {
            actor
                .token_id
                .and_then(|token| limiter.check(token, Instant::now()))
        })
    {
        rate_limit::remember(req, decision);
        if !decision.allowed {
            return Err(ApiError::too_many_requests());
        }
    }
    Ok(actor)
}

/// The use cases' services registered as app data.
///
/// # Errors
/// 500 when they are not registered (a wiring mistake).
pub fn services_of(req: &HttpRequest) -> Result<web::Data<Services>, ApiError> {
    req.app_data::<web::Data<Services>>()
        .cloned()
        .ok_or_else(|| {
            ApiError::from(mailroom_app::AppError::Internal(
                "Services not registered as app data".into(),
            ))
        })
}

fn bearer_token(req: &HttpRequest) -> Option<RawToken> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    RawToken::parse(token.trim()).ok()
}

/// Parses a record id from the path; a malformed id names no record: 404.
///
/// # Errors
/// 404 for a malformed id.
pub fn record_id<T: std::str::FromStr>(text: &str) -> Result<T, ApiError> {
    text.parse().map_err(|_| ApiError::not_found())
}

/// `start` and `limit` of a paged list, with defaults and the clamp applied. Other query
/// parameters are left to the route's own extractor.
#[derive(Debug, Clone, Copy)]
pub struct Paging(pub PageRequest);

impl FromRequest for Paging {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        std::future::ready(paging_from_query(req.query_string()))
    }
}

fn paging_from_query(query: &str) -> Result<Paging, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|e| ApiError::bad_request(format!("bad query string: {e}")))?;
    let value = |name: &str| {
        let mut values = pairs.iter().filter(|(key, _)| key == name);
        match (values.next(), values.next()) {
            (_, Some(_)) => Err(ApiError::invalid_field(name, "must be given at most once")),
            (first, None) => Ok(first.map(|(_, v)| v.as_str())),
        }
    };
    let (start, limit) = (value("start")?, value("limit")?);
    PageRequest::parse(start, limit)
        .map(Paging)
        .map_err(|e| match e {
            mailroom_domain::paging::InvalidPaging::Start => {
                ApiError::invalid_field("start", e.to_string())
            }
            mailroom_domain::paging::InvalidPaging::Limit => {
                ApiError::invalid_field("limit", e.to_string())
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_from_query_string() {
        let page = |q: &str| {
            paging_from_query(q)
                .map(|p| (p.0.start, p.0.limit))
                .map_err(|e| e.status().as_u16())
        };
        assert_eq!(page(""), Ok((0, 25)));
        assert_eq!(page("start=10&limit=1000"), Ok((10, 100)));
        assert_eq!(page("limit=-1"), Err(400));
        assert_eq!(page("start=abc"), Err(400));
        assert_eq!(page("start=1&start=2"), Err(400));
        assert_eq!(page("other=x"), Ok((0, 25)));
    }
}

/// A JSON request body. Unlike actix's `Json`, a type error names the field it occurred
/// in (`expiresInDays: invalid type: string "30", expected i64`), so clients can fix it.
/// Requires `Content-Type: application/json` (or `+json`) and at most 1 MiB.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: serde::de::DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .map(|essence| essence.trim().to_ascii_lowercase())
            .is_some_and(|essence| {
                essence == "application/json"
                    || (essence.starts_with("application/") && essence.ends_with("+json"))
            });
        let body = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            if !is_json {
                return Err(ApiError::bad_request(
                    "the body must be JSON sent with Content-Type: application/json",
                ));
            }
            let bytes = body.await.map_err(|error| {
                if error.as_response_error().status_code()
                    == actix_web::http::StatusCode::PAYLOAD_TOO_LARGE
                {
                    ApiError::new(
                        actix_web::http::StatusCode::PAYLOAD_TOO_LARGE,
                        "the body is larger than 1 MiB",
                    )
                } else {
                    ApiError::bad_request(format!("the body could not be read: {error}"))
                }
            })?;
            parse_json(&bytes).map(JsonBody)
        })
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // PostgreSQL text cannot hold U+0000; refusing it here keeps it from ever reaching a
    // write as a 500, whatever field it hides in.
    if has_escaped_nul(bytes) {
        return Err(ApiError::bad_request(
            "strings must not contain the NUL character (\\u0000)",
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let message = error.into_inner().to_string();
        if path == "." {
            ApiError::bad_request(format!("the body is not acceptable JSON: {message}"))
        } else {
            ApiError::invalid_field(&path, message)
        }
    })?;
    deserializer.end().map_err(|error| {
        ApiError::bad_request(format!("the body is not acceptable JSON: {error}"))
    })?;
    Ok(value)
}

/// Whether JSON text holds the escape `\u0000` (valid JSON can carry NUL no other way).
/// Escapes are skipped whole, so an escaped backslash followed by `u0000` is not one.
fn has_escaped_nul(bytes: &[u8]) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'\\' {
            if bytes.get(at + 1) == Some(&b'u') && bytes.get(at + 2..at + 6) == Some(b"0000") {
                return true;
            }
            at += 2;
        } else {
            at += 1;
        }
    }
    false
}

#[cfg(test)]
mod nul_tests {
    use super::has_escaped_nul;

    #[test]
    fn finds_the_nul_escape_and_only_it() {
        assert!(has_escaped_nul(br#"{"name": "a\u0000b"}"#));
        assert!(has_escaped_nul(br#"["\\\u0000"]"#));
        assert!(!has_escaped_nul(br#"{"name": "a\\u0000b"}"#));
        assert!(!has_escaped_nul(br#"{"name": "\u0001 \n"}"#));
        assert!(!has_escaped_nul(br#"{"name": "trailing \"#));
    }
}
