//! What every public page (the unsubscribe page, a form's pages, the link error page)
//! answers besides its HTML: never cached, in the reader's language, no referrer (a
//! token may be in the URL), not indexed, and its own content security policy.

use actix_web::{
    http::{
        header::{self, ContentType},
        StatusCode,
    },
    HttpResponse,
};

use crate::pages::Language;

/// The page answered when a template fails to render (an operator's override out of
/// fuel): nothing of the tenant's, nothing that can fail.
pub(super) const RENDER_FAILED: &str =
    "<!doctype html><html lang=\"en\"><title>Error</title><main><h1>Error</h1>\
     <p>The page could not be shown.</p></main></html>";

/// `rendered` as the page's answer with `status`, or [`RENDER_FAILED`] with a 500 when
/// it did not render (logged, naming `page`).
pub(super) fn rendered_or_failed(
    rendered: Result<String, minijinja::Error>,
    status: StatusCode,
    page: &str,
) -> (StatusCode, String) {
    match rendered {
        Ok(html) => (status, html),
        Err(error) => {
            tracing::error!(%error, page, "a public page failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, RENDER_FAILED.to_owned())
        }
    }
}

/// The response carrying a public page's `html`.
pub(super) fn page_response(
    status: StatusCode,
    language: Language,
    html: String,
    (content_security_policy, vary): (&str, &'static str),
) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header(ContentType::html())
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::CONTENT_LANGUAGE, language.tag()))
        .insert_header((header::VARY, vary))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            content_security_policy.to_owned(),
        ))
        .insert_header((header::HeaderName::from_static("x-robots-tag"), "noindex"))
        .body(html)
}
