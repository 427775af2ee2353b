//! The one API error type and its `application/problem+json` (RFC 9457) form.
//!
//! Every failure leaves the service in this shape, including actix-web's own: malformed
//! JSON, a wrong content type and unknown fields are 400, an oversized body 413, an
//! unknown route 404, a wrong method 405. A 500 is always a bug: its cause is logged in
//! full and the client sees only a generic sentence.

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::ServiceResponse,
    error::{PathError, QueryPayloadError},
    http::{
        header::{self, HeaderValue},
        StatusCode,
    },
    middleware::ErrorHandlerResponse,
    HttpRequest, HttpResponse, ResponseError,
};
use mailroom_app::AppError;
use mailroom_domain::FieldError;
use serde::Serialize;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An error answer of the API.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    detail: String,
    errors: Vec<FieldError>,
    allow: Option<String>,
    retry_after_secs: Option<u64>,
}

/// The body of an error answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// HTTP status code.
    pub status: u16,
    /// The status's reason phrase.
    pub title: String,
    /// What went wrong, for a person.
    pub detail: String,
    /// One entry per bad field (may be empty).
    pub errors: Vec<ProblemField>,
}

/// One bad field.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProblemField {
    /// The field as the client spells it.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ApiError {
    /// An error with `status` and `detail`.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
            errors: Vec::new(),
            allow: None,
            retry_after_secs: None,
        }
    }

    /// 400.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    /// 400 for one field.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let mut error = Self::bad_request(format!("{field}: {message}"));
        error.errors.push(FieldError::new(field, message));
        error
    }

    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "a valid bearer token with access to this resource is required",
        )
    }

    /// 404.
    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "no such resource")
    }

    /// 429: the token's rate limit is used up (`Retry-After` and `RateLimit-*` are added
    /// on the way out by [`crate::rate_limit::stamp_headers`]).
    pub fn too_many_requests() -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "this token has sent too many requests; retry after the time in Retry-After",
        )
    }

    /// 429: too many failed authentications from the client's address
    /// ([`crate::auth_failures`]); `Retry-After` says when the next attempt is accepted.
    pub fn too_many_failed_authentications(retry_after_secs: u64) -> Self {
        let mut error = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed authentications from this address; retry after the time in \
             Retry-After",
        );
        error.retry_after_secs = Some(retry_after_secs.max(1));
        error
    }

    /// 429 for a public form: too many posts to the form, or for the address, in a short
    /// time; `Retry-After` says when the next one is accepted.
    pub fn too_many_form_posts(retry_after_secs: u64) -> Self {
        let mut error = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "this form has been sent too often; retry after the time in Retry-After",
        );
        error.retry_after_secs = Some(retry_after_secs.max(1));
        error
    }

    /// 405 naming the allowed methods.
    pub fn method_not_allowed(allow: String) -> Self {
        let mut error = Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("this resource supports {allow}"),
        );
        error.allow = Some(allow);
        error
    }

    /// The status this error answers with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    fn problem(&self) -> Problem {
        Problem {
            status: self.status.as_u16(),
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            detail: self.detail.clone(),
            errors: self
                .errors
                .iter()
                .map(|e| ProblemField {
                    field: e.field.clone(),
                    message: e.message.clone(),
                })
                .collect(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.detail)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse<BoxBody> {
        let mut response = HttpResponse::build(self.status);
        response.insert_header((header::CONTENT_TYPE, PROBLEM_JSON));
        if self.status == StatusCode::UNAUTHORIZED {
            response.insert_header((header::WWW_AUTHENTICATE, "Bearer realm=\"mailroom\""));
        }
        if let Some(allow) = &self.allow {
            response.insert_header((header::ALLOW, allow.as_str()));
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.insert_header((header::RETRY_AFTER, "5"));
        }
        if let Some(seconds) = self.retry_after_secs {
            response.insert_header((header::RETRY_AFTER, seconds));
        }
        response.body(serde_json::to_string(&self.problem()).unwrap_or_default())
    }
}

impl From<AppError> for ApiError {
    fn from(error: AppError) -> Self {
        match error {
            AppError::Invalid(errors) => Self {
                status: StatusCode::BAD_REQUEST,
                detail: errors.summary(),
                errors: errors.0,
                allow: None,
                retry_after_secs: None,
            },
            AppError::BadRequest(detail) => Self::bad_request(detail),
            AppError::Unauthorized => Self::unauthorized(),
            AppError::NotFound => Self::not_found(),
            AppError::Forbidden(detail) => Self::new(StatusCode::FORBIDDEN, detail),
            AppError::Unavailable(reason) | AppError::AccountUnavailable(_, reason) => {
                tracing::warn!(%reason, "dependency unavailable");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the service is temporarily unavailable; retry shortly",
                )
            }
            AppError::TimedOut(reason) => {
                tracing::warn!(%reason, "statement timed out");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the request took longer than the database allows a statement to run; \
                     retry later, or narrow the request",
                )
            }
            AppError::TooManyAtOnce(detail) => {
                let mut error = Self::new(StatusCode::TOO_MANY_REQUESTS, detail);
                error.retry_after_secs = Some(1);
                error
            }
            AppError::Internal(cause) => {
                tracing::error!(%cause, "internal error");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "an unexpected error occurred",
                )
            }
        }
    }
}

/// Turns query-string errors into 400 problems.
pub fn query_error(error: QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::bad_request(format!("bad query parameters: {error}")).into()
}

/// Turns path-segment errors into 404 problems (a malformed id names no resource).
pub fn path_error(_error: PathError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::not_found().into()
}

/// Rewrites any error response that is not already a problem (actix's own 404, 405, 413
/// and friends) into one, keeping its status.
pub fn ensure_problem_body<B: MessageBody + 'static>(
    res: ServiceResponse<B>,
) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value == HeaderValue::from_static(PROBLEM_JSON));
    // The console's pages (crates/http/src/console) and the public links' pages
    // (`routes::link_error`) answer a browser's errors as HTML pages of their own; the
    // API under `/v2` answers problems only.
    let is_page = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| {
            value
                .to_str()
                .is_ok_and(|text| text.starts_with("text/html"))
        })
        && !res.request().path().starts_with("/v2");
    if is_problem || is_page {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    let detail = match status {
        StatusCode::NOT_FOUND => "no such resource".to_owned(),
        StatusCode::PAYLOAD_TOO_LARGE => "the body is larger than 1 MiB".to_owned(),
        other => other.canonical_reason().unwrap_or("error").to_owned(),
    };
    let (req, old) = res.into_parts();
    let mut rebuilt = ApiError::new(status, detail).error_response();
    for (name, value) in old.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rebuilt.headers_mut().insert(name.clone(), value.clone());
        }
    }
    Ok(ErrorHandlerResponse::Response(
        ServiceResponse::new(req, rebuilt).map_into_right_body(),
    ))
}
