//! A subscribe form's public pages, outside `/v2` and without authentication, like the
//! unsubscribe page (docs/api-decisions.md, "Subscribe forms and double opt-in"):
//!
//! - `GET /f/{formKey}`: the hosted page, with a signed time token in a hidden field;
//! - `POST /f/{formKey}`: a post, urlencoded (the page) or JSON (the account's own site),
//!   at most [`MAX_FORM_BODY`] bytes, limited per form and per address
//!   ([`FormPostLimits`]);
//! - `GET /f/{formKey}/confirm/{token}`: the confirmation link's page, which changes
//!   nothing (mail scanners fetch links) and whose button posts;
//! - `POST /f/{formKey}/confirm/{token}`: the confirmation.

use std::time::Instant;

use actix_web::{
    get,
    http::{
        header::{self},
        StatusCode,
    },
    post, web, HttpRequest, HttpResponse,
};
use futures_util::StreamExt as _;
use mailroom_app::{
    forms::{self, FormView, PostOrigin},
    Services,
};
use mailroom_domain::{
    branding::AccentColor,
    email::normalize_email,
    form::{parse_form_key, FormPost, RedirectUrl},
    FormId,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{
    link_error::link_error,
    public_page::{page_response, rendered_or_failed},
};
use crate::{
    blocking::run_blocking,
    pages::{BrandingContext, FormContext, Language, PageTemplates, FORM},
    problem::ApiError,
    rate_limit::{RateLimit, RateLimiter},
};

/// The largest form post read (bytes): an address and twenty attributes of 1,000
/// characters fit, with room for their encoding's overhead.
pub const MAX_FORM_BODY: usize = 16 * 1024;

/// The most posts to one form in a burst, and how fast they come back.
pub const PER_FORM_LIMIT: RateLimit = RateLimit {
    per_second: 1.0,
    burst: 60,
};

/// The most posts for one address (over every form this process serves) in a burst,
/// and how fast they come back: five an hour.
pub const PER_ADDRESS_LIMIT: RateLimit = RateLimit {
    per_second: 5.0 / 3600.0,
    burst: 5,
};

/// Forms and addresses tracked at once, at most, per limiter.
pub const MAX_TRACKED: usize = 10_000;

const FORM_URLENCODED: &str = "application/x-www-form-urlencoded";
const JSON: &str = "application/json";

/// The in-memory limits of form posts, one per process (with N API replicas a form
/// may take up to N times the rate, as the token limit does).
#[derive(Debug)]
pub struct FormPostLimits {
    per_form: RateLimiter<FormId>,
    per_address: RateLimiter<[u8; 16]>,
}

impl FormPostLimits {
    /// Limits of `per_form` and `per_address` (`None` turns one off).
    pub fn new(per_form: Option<RateLimit>, per_address: Option<RateLimit>) -> Self {
        Self {
            per_form: RateLimiter::bounded(per_form, MAX_TRACKED),
            per_address: RateLimiter::bounded(per_address, MAX_TRACKED),
        }
    }

    /// A post to `form` for `email`, if either is refused: the seconds until it may be
    /// sent again.
    fn refused(&self, form: FormId, email: Option<&str>) -> Option<u64> {
        let now = Instant::now();
        if let Some(decision) = self.per_form.check(form, now) {
            if !decision.allowed {
                return Some(decision.retry_after_secs);
            }
        }
        let email = email?;
        let digest = Sha256::digest(normalize_email(email.trim()).as_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
        let decision = self.per_address.check(key, now)?;
        (!decision.allowed).then_some(decision.retry_after_secs)
    }
}

impl Default for FormPostLimits {
    fn default() -> Self {
        Self::new(Some(PER_FORM_LIMIT), Some(PER_ADDRESS_LIMIT))
    }
}

/// The fields `POST /f/{formKey}` reads, for the OpenAPI document only: the form's
/// accepted attributes come as fields of their own names.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct FormPostBody {
    /// The address.
    email: String,
    /// The honeypot: left empty by people; a post with it filled is answered as a
    /// success and changes nothing.
    #[schema(rename = "website-url")]
    website_url: Option<String>,
    /// The hosted page's time token (required in an urlencoded post).
    #[schema(rename = "form-token")]
    form_token: Option<String>,
}

/// The answer to a JSON post: the same for every well-formed post of a form.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FormPostAnswer {
    /// `pending_confirmation` (double opt-in: a confirmation mail is on its way) or
    /// `subscribed`.
    status: &'static str,
}

/// The hosted page of a subscribe form.
#[utoipa::path(
    tag = "links",
    params(("formKey" = String, Path, description = "The form's public key (`formKey` of the form)")),
    responses(
        (status = 200, content_type = "text/html", description = "The page"),
        (status = 404, body = crate::problem::Problem, description = "No such form"),
    )
)]
#[get("/f/{formKey}")]
pub(crate) async fn form_page(
    services: web::Data<Services>,
    pages: web::Data<PageTemplates>,
    key: web::Path<String>,
    request: HttpRequest,
) -> HttpResponse {
    let key = key.into_inner();
    match run_blocking(move || forms::form_page(&services, &key)).await {
        Ok(page) => html_page(
            &pages,
            &request,
            &page.view,
            "form",
            &page.time_token,
            None,
            StatusCode::OK,
        ),
        Err(error) => link_error(&pages, &request, &error),
    }
}

/// A post to a subscribe form: urlencoded from its hosted page (with the page's time
/// token) or JSON. Every well-formed post gets the same answer whatever the address.
#[utoipa::path(
    tag = "links",
    params(("formKey" = String, Path, description = "The form's public key (`formKey` of the form)")),
    request_body(content = FormPostBody, content_type = "application/x-www-form-urlencoded", description = "`email`, the form's attributes by slug, `website-url` (left empty) and `form-token`; the same fields as a JSON object are accepted too"),
    responses(
        (status = 200, body = FormPostAnswer, description = "Accepted (JSON); an urlencoded post gets the page, or 303 to the form's success redirect"),
        (status = 303, description = "To the form's success redirect (urlencoded posts)"),
        (status = 400, body = crate::problem::Problem, description = "A bad field, a post too soon after its page, or without its page's token"),
        (status = 404, body = crate::problem::Problem, description = "No such form"),
        (status = 413, body = crate::problem::Problem, description = "The body is larger than 16 KiB"),
        (status = 415, body = crate::problem::Problem, description = "Neither urlencoded nor JSON"),
        (status = 429, body = crate::problem::Problem, description = "Too many posts to the form or for the address"),
    )
)]
#[post("/f/{formKey}")]
pub(crate) async fn submit_form(
    services: web::Data<Services>,
    pages: web::Data<PageTemplates>,
    limits: web::Data<FormPostLimits>,
    key: web::Path<String>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let key = key.into_inner();
    let (_, form) = parse_form_key(&key).ok_or_else(ApiError::not_found)?;
    let origin = match media_type(&request).as_deref() {
        Some(FORM_URLENCODED) => PostOrigin::HtmlForm,
        Some(JSON) => PostOrigin::Json,
        _ => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a form post is application/x-www-form-urlencoded or application/json",
            ))
        }
    };
    let body = bounded_body(payload).await?;
    let post = read_post(&body, origin)?;
    if let Some(retry_after) =
        limits.refused(form, post.fields.get("email").and_then(Value::as_str))
    {
        return Err(ApiError::too_many_form_posts(retry_after));
    }
    let page_services = services.clone();
    let page_key = key.clone();
    let answer = run_blocking(move || forms::submit_form(&services, &key, post, origin)).await;
    match (answer, origin) {
        (Ok(answer), PostOrigin::Json) => Ok(HttpResponse::Ok()
            .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
            .json(FormPostAnswer {
                status: if answer.view.form.settings.double_opt_in {
                    "pending_confirmation"
                } else {
                    "subscribed"
                },
            })),
        (Ok(answer), PostOrigin::HtmlForm) => {
            if let Some(url) = &answer.view.form.settings.success_redirect_url {
                return Ok(see_other(url));
            }
            let language = Language::of_request(&request);
            let notice = if answer.view.form.settings.double_opt_in {
                "form_sent_pending"
            } else {
                "form_sent_done"
            };
            Ok(html_page(
                &pages,
                &request,
                &answer.view,
                "sent",
                "",
                Some(pages.text(language, notice)),
                StatusCode::OK,
            ))
        }
        // A refused post from the page gets the page again, with a fresh token and a
        // notice in the reader's language.
        (Err(error), PostOrigin::HtmlForm) if error.status() == StatusCode::BAD_REQUEST => {
            let page = run_blocking(move || forms::form_page(&page_services, &page_key)).await?;
            let language = Language::of_request(&request);
            Ok(html_page(
                &pages,
                &request,
                &page.view,
                "form",
                &page.time_token,
                Some(pages.text(language, "form_error")),
                StatusCode::BAD_REQUEST,
            ))
        }
        (Err(error), _) => Err(error),
    }
}

/// The confirmation link's page: a button that confirms. It changes nothing.
#[utoipa::path(
    tag = "links",
    params(
        ("formKey" = String, Path, description = "The form's public key"),
        ("token" = String, Path, description = "The confirmation token from the mail's `confirm_url`"),
    ),
    responses(
        (status = 200, content_type = "text/html", description = "The page"),
        (status = 400, body = crate::problem::Problem, description = "The link has expired"),
        (status = 404, body = crate::problem::Problem, description = "The link was not minted here, or its form is gone"),
    )
)]
#[get("/f/{formKey}/confirm/{token}")]
pub(crate) async fn confirmation_page(
    services: web::Data<Services>,
    pages: web::Data<PageTemplates>,
    path: web::Path<(String, String)>,
    request: HttpRequest,
) -> HttpResponse {
    let (key, token) = path.into_inner();
    let state = match run_blocking(move || forms::confirmation_page(&services, &key, &token)).await
    {
        Ok(state) => state,
        Err(error) => return link_error(&pages, &request, &error),
    };
    let mode = if state.already_confirmed {
        "already_confirmed"
    } else {
        "confirm"
    };
    html_page(
        &pages,
        &request,
        &state.view,
        mode,
        "",
        None,
        StatusCode::OK,
    )
}

/// Confirms: the contact is subscribed and no longer pending. A link is used once;
/// following it again changes nothing.
#[utoipa::path(
    tag = "links",
    params(
        ("formKey" = String, Path, description = "The form's public key"),
        ("token" = String, Path, description = "The confirmation token from the mail's `confirm_url`"),
    ),
    responses(
        (status = 200, content_type = "text/html", description = "The page after the confirmation"),
        (status = 303, description = "To the form's confirmation redirect"),
        (status = 400, body = crate::problem::Problem, description = "The link has expired"),
        (status = 404, body = crate::problem::Problem, description = "The link was not minted here, its form or its contact is gone"),
    )
)]
#[post("/f/{formKey}/confirm/{token}")]
pub(crate) async fn confirm_subscription(
    services: web::Data<Services>,
    pages: web::Data<PageTemplates>,
    path: web::Path<(String, String)>,
    request: HttpRequest,
) -> HttpResponse {
    let (key, token) = path.into_inner();
    let state = match run_blocking(move || forms::confirm(&services, &key, &token)).await {
        Ok(state) => state,
        Err(error) => return link_error(&pages, &request, &error),
    };
    if let Some(url) = forms::confirmation_redirect(&state) {
        return see_other(url);
    }
    let mode = if state.already_confirmed {
        "already_confirmed"
    } else {
        "confirmed"
    };
    html_page(
        &pages,
        &request,
        &state.view,
        mode,
        "",
        None,
        StatusCode::OK,
    )
}

/// `OPTIONS /f/{formKey}`: the CORS preflight of a JSON post from the account's own
/// site. Any origin may post: the route takes no credentials and every post is answered
/// alike, so another site learns nothing it could not learn by posting itself.
pub(crate) async fn preflight() -> HttpResponse {
    HttpResponse::NoContent()
        .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
        .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, "POST"))
        .insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, "content-type"))
        .insert_header((header::ACCESS_CONTROL_MAX_AGE, "86400"))
        .finish()
}

fn media_type(request: &HttpRequest) -> Option<String> {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|media| media.trim().to_ascii_lowercase())
}

/// The body, refused with 413 once it passes [`MAX_FORM_BODY`].
async fn bounded_body(mut payload: web::Payload) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| ApiError::bad_request("the body could not be read"))?;
        if body.len() + chunk.len() > MAX_FORM_BODY {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a form post is at most {MAX_FORM_BODY} bytes"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The post's fields: an urlencoded body's as strings (a field named twice is refused),
/// a JSON body's object as it is.
fn read_post(body: &[u8], origin: PostOrigin) -> Result<FormPost, ApiError> {
    let mut fields = Map::new();
    match origin {
        PostOrigin::HtmlForm => {
            let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
                .map_err(|_| ApiError::bad_request("the form body is not valid"))?;
            for (name, value) in pairs {
                if fields.insert(name.clone(), Value::String(value)).is_some() {
                    return Err(ApiError::invalid_field(&name, "is sent more than once"));
                }
            }
        }
        PostOrigin::Json => match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(object)) => fields = object,
            _ => return Err(ApiError::bad_request("the body must be a JSON object")),
        },
    }
    Ok(FormPost { fields })
}

fn see_other(url: &RedirectUrl) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, url.as_str()))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .finish()
}

/// The origin (`scheme://host[:port]`) of a redirect, which the page's `form-action`
/// must allow: browsers hold a form's redirect to that directive too.
fn origin_of(url: &RedirectUrl) -> &str {
    let text = url.as_str();
    let after_scheme = text.find("://").map_or(0, |at| at + 3);
    let end = text[after_scheme..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |at| after_scheme + at);
    &text[..end]
}

/// A page from the `form.html` template (`crate::pages`) in the reader's language with
/// the account's branding. A render that fails (an override out of fuel) is logged and
/// answered 500 with a plain page.
fn html_page(
    pages: &PageTemplates,
    request: &HttpRequest,
    view: &FormView,
    mode: &'static str,
    time_token: &str,
    notice: Option<String>,
    status: StatusCode,
) -> HttpResponse {
    let language = Language::of_request(request);
    let branding = &view.branding;
    let accent = branding.accent_color.unwrap_or(AccentColor::DEFAULT);
    let context = FormContext {
        mode,
        sender: branding.display_name.as_ref().map_or_else(
            || view.account_name.clone(),
            |name| name.as_str().to_owned(),
        ),
        branding: BrandingContext::of(branding),
        accent: accent.to_hex(),
        on_accent: accent.text_color().as_css().to_owned(),
        topics: view.topic_names.clone(),
        attributes: view.form.settings.attributes.clone(),
        time_token: time_token.to_owned(),
        notice,
    };
    let (status, html) = rendered_or_failed(pages.render(FORM, language, &context), status, "form");
    let settings = &view.form.settings;
    let mut form_action = "'self'".to_owned();
    let redirect = match mode {
        "form" => settings.success_redirect_url.as_ref(),
        "confirm" => settings.confirmation_redirect_url.as_ref(),
        _ => None,
    };
    if let Some(url) = redirect {
        form_action.push(' ');
        form_action.push_str(origin_of(url));
    }
    // A confirmation token is in the URL: the shared headers keep it from anything the
    // page loads.
    let policy = format!(
        "default-src 'none'; style-src 'unsafe-inline'; img-src https:; \
         form-action {form_action}; frame-ancestors 'none'; base-uri 'none'"
    );
    page_response(status, language, html, (&policy, "Accept-Language"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirects_origin_is_its_scheme_and_authority() {
        for (url, origin) in [
            ("https://example.com/thanks?x=1", "https://example.com"),
            ("http://example.com:8080", "http://example.com:8080"),
            ("https://example.com#top", "https://example.com"),
        ] {
            let url = RedirectUrl::parse(url).expect("valid");
            assert_eq!(origin_of(&url), origin);
        }
    }

    #[test]
    fn an_address_is_limited_over_case_and_a_form_over_addresses() {
        let limits = FormPostLimits::new(
            Some(RateLimit {
                per_second: 0.0001,
                burst: 3,
            }),
            Some(RateLimit {
                per_second: 0.0001,
                burst: 2,
            }),
        );
        let form = FormId::from_uuid(mailroom_domain::Uuid::from_u128(1));
        assert_eq!(limits.refused(form, Some("Ada@Example.com")), None);
        assert_eq!(limits.refused(form, Some("ada@example.com")), None);
        assert!(limits.refused(form, Some("ADA@example.com")).is_some());
        // The form's third post was taken by the refused one: the fourth is refused
        // whatever the address.
        assert!(limits.refused(form, Some("grace@example.com")).is_some());
    }
}
