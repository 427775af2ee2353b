//! What a public link answers when it cannot be served (a token not minted here, a
//! contact or link gone, a form that does not parse, a failure). A person who clicked a
//! link in a mail reads a page in their language; anything else (a mail provider's
//! RFC 8058 one-click post, a script) keeps the problem+json it can parse. The `Accept`
//! header decides: a page when its most preferred type is HTML, as a browser's is.

use actix_web::{
    http::header::{Accept, Header},
    HttpRequest, HttpResponse, ResponseError,
};
use mailroom_domain::branding::AccentColor;

use super::public_page::page_response;
use crate::{
    pages::{Language, LinkErrorContext, PageTemplates, LINK_ERROR},
    problem::ApiError,
};

/// `error` as the reader of `request` can use it: the link error page for a browser,
/// with the error's status, else the problem document.
pub(crate) fn link_error(
    pages: &PageTemplates,
    request: &HttpRequest,
    error: &ApiError,
) -> HttpResponse {
    if !prefers_html(request) {
        return error.error_response();
    }
    let status = error.status_code();
    let (title, explanation) = if status.is_server_error() {
        ("server_error_title", "server_error_text")
    } else if status == actix_web::http::StatusCode::NOT_FOUND {
        ("link_invalid_title", "link_invalid_text")
    } else {
        ("request_invalid_title", "request_invalid_text")
    };
    let language = Language::of_request(request);
    let accent = AccentColor::DEFAULT;
    let context = LinkErrorContext {
        title,
        explanation,
        accent: accent.to_hex(),
        on_accent: accent.text_color().as_css().to_owned(),
    };
    let html = match pages.render(LINK_ERROR, language, &context) {
        Ok(html) => html,
        Err(render_error) => {
            // An operator's override out of fuel: the status still says what happened.
            tracing::error!(error = %render_error, "the link error page failed to render");
            return error.error_response();
        }
    };
    page_response(
        status,
        language,
        html,
        (
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; \
             base-uri 'none'",
            "Accept, Accept-Language",
        ),
    )
}

/// Whether the most preferred type of the request's `Accept` is an HTML one. No header,
/// or one that does not parse, is an API client's.
fn prefers_html(request: &HttpRequest) -> bool {
    Accept::parse(request).is_ok_and(|accept| {
        !accept.is_empty() && {
            let preferred = accept.preference();
            preferred.essence_str() == "text/html"
                || preferred.essence_str() == "application/xhtml+xml"
        }
    })
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::prefers_html;

    #[test]
    fn a_browser_prefers_html_and_clients_do_not() {
        let with = |accept: &str| {
            prefers_html(
                &TestRequest::default()
                    .insert_header(("accept", accept))
                    .to_http_request(),
            )
        };
        assert!(with(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        ));
        assert!(with("application/xhtml+xml"));
        assert!(!with("*/*"));
        assert!(!with("application/problem+json, text/html;q=0.5"));
        assert!(!with("application/json"));
        assert!(!prefers_html(&TestRequest::default().to_http_request()));
    }
}
