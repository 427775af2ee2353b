//! The public unsubscribe page, outside `/v2` and without authentication: the token in
//! the path is the only credential (docs/design.md#8-delivery, Unsubscribe).
//!
//! `GET /u/{token}` shows the page and changes nothing (mail scanners fetch links).
//! `POST /u/{token}` unsubscribes: the RFC 8058 one-click body
//! `List-Unsubscribe=One-Click`, the page's "all" button, and any post that is not the
//! page's topic form unsubscribe from everything; `action=topics` with `topic=<id>` fields
//! (an `application/x-www-form-urlencoded` form) unsubscribes from those topics. Both
//! answer 200 with the page, never a redirect. A link that cannot be served answers a
//! browser with a page too (`link_error`), an API client with problem+json.

use actix_web::{
    get,
    http::{
        header::{self},
        StatusCode,
    },
    post, web, HttpRequest, HttpResponse,
};
use mailroom_app::{
    unsubscribe::{self, SubscriptionPage, UnsubscribeChoice},
    AppError, Services,
};
use mailroom_domain::{branding::AccentColor, TopicId};

use super::{
    link_error::link_error,
    public_page::{page_response, rendered_or_failed},
};
use crate::{
    blocking::run_blocking,
    pages::{BrandingContext, Language, PageTemplates, TopicContext, UnsubscribeContext},
    problem::ApiError,
};

/// The page's accent when the account sets none.
const DEFAULT_ACCENT: AccentColor = AccentColor::DEFAULT;

const FORM_URLENCODED: &str = "application/x-www-form-urlencoded";

/// The fields `POST /u/{token}` reads, for the OpenAPI document only: the body is parsed
/// by hand ([`choice`]) because any post that is not the topic form means "everything".
/// (Documented as a plain string, schemathesis could not build a form from it.)
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct UnsubscribeForm {
    /// `One-Click` (RFC 8058).
    #[schema(rename = "List-Unsubscribe")]
    list_unsubscribe: Option<String>,
    /// `all` or `topics`.
    action: Option<String>,
    /// With `action=topics`: a topic id; the field repeats, once per topic.
    topic: Option<Vec<String>>,
}

/// The unsubscribe page: unsubscribe from all mail of the account, or tick topics.
#[utoipa::path(
    tag = "links",
    params(("token" = String, Path, description = "Unsubscribe token from the message's `unsubscribe_url`")),
    responses(
        (status = 200, content_type = "text/html", description = "The page"),
        (status = 404, body = crate::problem::Problem, description = "The token was not minted here, or the contact is gone (a browser, whose `Accept` prefers HTML, gets a page)"),
    )
)]
#[get("/u/{token}")]
pub(crate) async fn unsubscribe_page(
    services: web::Data<Services>,
    pages: web::Data<PageTemplates>,
    token: web::Path<String>,
    request: HttpRequest,
) -> HttpResponse {
    let token = token.into_inner();
    match run_blocking(move || unsubscribe::subscription_page(&services, &token)).await {
        Ok(page) => html_page(&pages, &request, &page, None),
        Err(error) => link_error(&pages, &request, &error),
    }
}

/// Unsubscribes: RFC 8058 one-click (`List-Unsubscribe=One-Click`) or the page's form.
/// Safe to repeat: a second post changes and counts nothing.
#[utoipa::path(
    tag = "links",
    params(("token" = String, Path, description = "Unsubscribe token from the message's `unsubscribe_url`")),
    request_body(content = UnsubscribeForm, content_type = "application/x-www-form-urlencoded", description = "`List-Unsubscribe=One-Click`, `action=all`, or `action=topics&topic=<id>&topic=<id>`"),
    responses(
        (status = 200, content_type = "text/html", description = "The page after the change"),
        (status = 400, body = crate::problem::Problem, description = "A topic form without topics, or with a topic that is not the account's (a browser gets a page)"),
        (status = 404, body = crate::problem::Problem, description = "The token was not minted here, or the contact is gone (a browser, whose `Accept` prefers HTML, gets a page)"),
    )
)]
#[post("/u/{token}")]
pub(crate) async fn unsubscribe_post(
    services: web::Data<Services>,
    pages: web::Data<PageTemplates>,
    token: web::Path<String>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    let token = token.into_inner();
    let done = match choice(&request, &body) {
        Ok(choice) => {
            run_blocking(move || unsubscribe::unsubscribe(&services, &token, &choice)).await
        }
        Err(error) => Err(error),
    };
    match done {
        Ok(done) => {
            let notice = if done.page.unsubscribed {
                "notice_unsubscribed_all"
            } else {
                "notice_saved"
            };
            html_page(&pages, &request, &done.page, Some(notice))
        }
        Err(error) => link_error(&pages, &request, &error),
    }
}

/// Reads what the post asks for. Only the page's topic form (urlencoded, `action=topics`)
/// asks for less than everything: a one-click post, in whatever encoding a mail provider
/// sends it (RFC 8058 allows `multipart/form-data` too), means "unsubscribe me".
fn choice(request: &HttpRequest, body: &[u8]) -> Result<UnsubscribeChoice, ApiError> {
    let urlencoded = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(FORM_URLENCODED));
    if !urlencoded {
        return Ok(UnsubscribeChoice::Everything);
    }
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
        .map_err(|_| AppError::BadRequest("the form body is not valid".into()))?;
    let topics_form = fields
        .iter()
        .any(|(name, value)| name == "action" && value == "topics");
    if !topics_form {
        return Ok(UnsubscribeChoice::Everything);
    }
    let topics = fields
        .iter()
        .filter(|(name, _)| name == "topic")
        .map(|(_, value)| {
            TopicId::parse(value).map_err(|_| AppError::invalid("topic", "must be a topic id"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(UnsubscribeChoice::Topics(topics))
}

/// The page from the `unsubscribe.html` template (`crate::pages`) in the reader's
/// language, with the account's branding. A render that fails (an override out of
/// fuel) is logged and answered 500 with a plain page: nothing was lost, the post's
/// change is already committed.
fn html_page(
    pages: &PageTemplates,
    request: &HttpRequest,
    page: &SubscriptionPage,
    notice: Option<&str>,
) -> HttpResponse {
    let language = Language::of_request(request);
    let branding = &page.branding;
    let accent = branding.accent_color.unwrap_or(DEFAULT_ACCENT);
    let context = UnsubscribeContext {
        sender: branding.display_name.as_ref().map_or_else(
            || page.account_name.clone(),
            |name| name.as_str().to_owned(),
        ),
        email: page.email.clone(),
        branding: BrandingContext::of(branding),
        accent: accent.to_hex(),
        on_accent: accent.text_color().as_css().to_owned(),
        notice: notice.map(|key| pages.text(language, key)),
        unsubscribed: page.unsubscribed,
        topics: page
            .topics
            .iter()
            .map(|topic| TopicContext {
                id: topic.id.to_string(),
                name: topic.name.clone(),
                description: topic.description.clone(),
                unsubscribed: topic.unsubscribed,
            })
            .collect(),
    };
    let (status, html) = rendered_or_failed(
        pages.render(crate::pages::UNSUBSCRIBE, language, &context),
        StatusCode::OK,
        "unsubscribe",
    );
    // Images from https only: the account's logo, shown by URL (fetched without a
    // referrer, so the token in the URL does not leak to its host).
    page_response(
        status,
        language,
        html,
        (
            "default-src 'none'; style-src 'unsafe-inline'; img-src https:; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
            "Accept-Language",
        ),
    )
}
