//! The public unsubscribe page, outside `/v2` and without authentication: the token in
//! the path is the only credential (docs/design.md#8-delivery, Unsubscribe).
//!
//! `GET /u/{token}` shows the page and changes nothing (mail scanners fetch links).
//! `POST /u/{token}` unsubscribes: the RFC 8058 one-click body
//! `List-Unsubscribe=One-Click`, the page's "all" button, and any post that is not the
//! page's topic form unsubscribe from everything; `action=topics` with `topic=<id>` fields
//! (an `application/x-www-form-urlencoded` form) unsubscribes from those topics. Both
//! answer 200 with the page, never a redirect.

use actix_web::{
    get,
    http::header::{self, ContentType},
    post, web, HttpRequest, HttpResponse,
};
use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};
use mailroom_app::{
    unsubscribe::{self, SubscriptionPage, UnsubscribeChoice},
    AppError, Services,
};
use mailroom_domain::TopicId;

use crate::{blocking::run_blocking, problem::ApiError};

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
        (status = 404, body = crate::problem::Problem, description = "The token was not minted here, or the contact is gone"),
    )
)]
#[get("/u/{token}")]
pub(crate) async fn unsubscribe_page(
    services: web::Data<Services>,
    token: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let token = token.into_inner();
    let page = run_blocking(move || unsubscribe::subscription_page(&services, &token)).await?;
    Ok(html_page(&page, None))
}

/// Unsubscribes: RFC 8058 one-click (`List-Unsubscribe=One-Click`) or the page's form.
/// Safe to repeat: a second post changes and counts nothing.
#[utoipa::path(
    tag = "links",
    params(("token" = String, Path, description = "Unsubscribe token from the message's `unsubscribe_url`")),
    request_body(content = UnsubscribeForm, content_type = "application/x-www-form-urlencoded", description = "`List-Unsubscribe=One-Click`, `action=all`, or `action=topics&topic=<id>&topic=<id>`"),
    responses(
        (status = 200, content_type = "text/html", description = "The page after the change"),
        (status = 400, body = crate::problem::Problem, description = "A topic form without topics, or with a topic that is not the account's"),
        (status = 404, body = crate::problem::Problem, description = "The token was not minted here, or the contact is gone"),
    )
)]
#[post("/u/{token}")]
pub(crate) async fn unsubscribe_post(
    services: web::Data<Services>,
    token: web::Path<String>,
    request: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let token = token.into_inner();
    let choice = choice(&request, &body)?;
    let done = run_blocking(move || unsubscribe::unsubscribe(&services, &token, &choice)).await?;
    let notice = if done.page.unsubscribed {
        "You are unsubscribed from all mail of this sender."
    } else {
        "Your choice is saved."
    };
    Ok(html_page(&done.page, Some(notice)))
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

/// The page, small and accessible: a language, a title, one heading, a status line that
/// screen readers announce, and native form controls each with its label.
fn html_page(page: &SubscriptionPage, notice: Option<&str>) -> HttpResponse {
    let account = text(&page.account_name);
    let email = text(&page.email);
    let mut html = String::with_capacity(2048);
    html.push_str(&format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>Email preferences – {account}</title>
<style>
body {{ font-family: system-ui, sans-serif; line-height: 1.5; max-width: 36rem; margin: 2rem auto; padding: 0 1rem; color: #1a1a1a; background: #fff; }}
fieldset {{ border: 1px solid #767676; padding: 1rem; margin: 0 0 1rem; }}
.topic {{ margin: 0 0 .75rem; }}
.description {{ margin: 0 0 0 1.75rem; color: #4a4a4a; }}
button {{ font: inherit; padding: .5rem 1rem; }}
:focus-visible {{ outline: 3px solid #005fcc; outline-offset: 2px; }}
</style>
</head>
<body>
<main>
<h1>Email preferences</h1>
<p>Mail from <strong>{account}</strong> to <strong>{email}</strong>.</p>
"#
    ));
    if let Some(notice) = notice {
        html.push_str(&format!(
            "<p role=\"status\"><strong>{}</strong></p>\n",
            text(notice)
        ));
    }
    if page.unsubscribed {
        html.push_str("<p>You are unsubscribed from all mail of this sender.</p>\n");
    } else {
        if !page.topics.is_empty() {
            html.push_str(
                "<form method=\"post\">\n<fieldset>\n<legend>Unsubscribe from single topics</legend>\n",
            );
            for (index, topic) in page.topics.iter().enumerate() {
                let id = format!("topic-{index}");
                let described = topic
                    .description
                    .as_deref()
                    .map(|description| {
                        (
                            format!(" aria-describedby=\"{id}-description\""),
                            format!(
                                "<p class=\"description\" id=\"{id}-description\">{}</p>\n",
                                text(description)
                            ),
                        )
                    })
                    .unwrap_or_default();
                let state = if topic.unsubscribed {
                    " checked disabled"
                } else {
                    ""
                };
                let suffix = if topic.unsubscribed {
                    " (unsubscribed)"
                } else {
                    ""
                };
                html.push_str(&format!(
                    "<div class=\"topic\">\n<input type=\"checkbox\" id=\"{id}\" name=\"topic\" value=\"{value}\"{state}{aria}>\n<label for=\"{id}\">{name}{suffix}</label>\n{description}</div>\n",
                    value = attr(&topic.id.to_string()),
                    aria = described.0,
                    name = text(&topic.name),
                    description = described.1,
                ));
            }
            html.push_str(
                "</fieldset>\n<button type=\"submit\" name=\"action\" value=\"topics\">Unsubscribe from the selected topics</button>\n</form>\n",
            );
        }
        html.push_str(
            "<form method=\"post\">\n<p><button type=\"submit\" name=\"action\" value=\"all\">Unsubscribe from all mail</button></p>\n</form>\n",
        );
    }
    html.push_str("</main>\n</body>\n</html>\n");
    HttpResponse::Ok()
        .insert_header(ContentType::html())
        .insert_header((header::CACHE_CONTROL, "no-store"))
        // The token is in the URL: it must not leak to anything the page could load.
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
        ))
        .insert_header((header::HeaderName::from_static("x-robots-tag"), "noindex"))
        .body(html)
}
