//! The admin console at `/console`: server-rendered HTML pages over the same use cases as
//! the API (`docs/console.md`). This module only reads forms and cookies, calls use cases
//! and renders templates; sessions and their rules live in `mailroom_app::console`.
//!
//! Every state-changing request is a `POST` that passes two checks before its form is
//! read: the browser's `Origin` (or `Sec-Fetch-Site`) must not name another site, and the
//! form must carry the session's CSRF token (a synchronizer token stored with the
//! session). The sign-in forms, before any session exists, carry a token that must match
//! a cookie set with the form instead.

// The console's checks answer early with the page to show, so `Err` is a whole response;
// it is built once per refused request and returned straight to actix, where boxing it
// would only add an allocation.
#![allow(clippy::result_large_err)]

mod announcement_pages;
mod announcement_review;
mod mail_server_pages;
mod pages;
mod render;
mod template_pages;
// The account pages of settings, audience and logs (one block, kept together).
mod automation_pages;
mod contact_pages;
mod extra_templates;
mod log_pages;
mod page_kit;
mod segment_pages;
mod settings_pages;
mod subscribe_form_pages;

use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use mailroom_app::{console::SignedIn, AppError, Services};
use mailroom_domain::console::{ConsoleSecret, CONSOLE_SECRET_BYTES};
use serde::{de::DeserializeOwned, Serialize};

pub use render::Chart;

/// The session cookie.
pub const SESSION_COOKIE: &str = "mailroom_console";
/// The cookie the sign-in forms' token is checked against (before a session exists).
pub const FORM_COOKIE: &str = "mailroom_console_form";
/// The largest console form accepted (413 beyond): the forms hold a few short fields.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// Registers the console's routes.
pub fn configure(config: &mut web::ServiceConfig) {
    config.service(
        web::scope("/console")
            .app_data(web::PayloadConfig::new(MAX_FORM_BYTES))
            .route("", web::get().to(pages::home))
            .route("/", web::get().to(pages::home))
            .route("/static/console.css", web::get().to(stylesheet))
            .route("/static/htmx.min.js", web::get().to(htmx))
            .route("/static/editor.js", web::get().to(editor))
            .route("/sign-in", web::get().to(pages::sign_in_form))
            .route("/sign-in", web::post().to(pages::sign_in))
            .route("/login/{link}", web::get().to(pages::login_link_form))
            .route("/login/{link}", web::post().to(pages::login_link))
            .route("/sign-out", web::post().to(pages::sign_out))
            .route("/accounts", web::get().to(pages::accounts))
            .route("/accounts", web::post().to(pages::create_account))
            .route("/accounts/{account_id}", web::get().to(pages::dashboard))
            // Template bodies may be as large as the API accepts.
            .service(
                web::resource("/accounts/{account_id}/templates")
                    .app_data(web::PayloadConfig::new(crate::MAX_BODY_BYTES))
                    .route(web::get().to(template_pages::list))
                    .route(web::post().to(template_pages::create)),
            )
            .route(
                "/accounts/{account_id}/templates/new",
                web::get().to(template_pages::new_form),
            )
            .service(
                web::resource("/accounts/{account_id}/templates/{template_id}")
                    .app_data(web::PayloadConfig::new(crate::MAX_BODY_BYTES))
                    .route(web::get().to(template_pages::edit_form))
                    .route(web::post().to(template_pages::update)),
            )
            // Drafts previewed without saving: a new template's, then a stored one's.
            .service(
                web::resource("/accounts/{account_id}/templates/new/preview")
                    .app_data(web::PayloadConfig::new(crate::MAX_BODY_BYTES))
                    .route(web::post().to(template_pages::preview_new_draft)),
            )
            .service(
                web::resource("/accounts/{account_id}/templates/{template_id}/preview")
                    .app_data(web::PayloadConfig::new(crate::MAX_BODY_BYTES))
                    .route(web::get().to(template_pages::preview))
                    .route(web::post().to(template_pages::preview_draft_of)),
            )
            // Settings, audience and logs: one block, kept together.
            .route("/static/import.js", web::get().to(import_script))
            .route(
                "/accounts/{account_id}/settings",
                web::get().to(settings_pages::show),
            )
            .route(
                "/accounts/{account_id}/settings",
                web::post().to(settings_pages::update),
            )
            .route(
                "/accounts/{account_id}/webhooks",
                web::post().to(settings_pages::set),
            )
            .route(
                "/accounts/{account_id}/contacts",
                web::get().to(contact_pages::list),
            )
            .route(
                "/accounts/{account_id}/contacts/segment",
                web::get().to(contact_pages::segment),
            )
            .route(
                "/accounts/{account_id}/contacts/segment/count",
                web::get().to(contact_pages::segment_count),
            )
            .route(
                "/accounts/{account_id}/segments",
                web::get().to(segment_pages::list),
            )
            .route(
                "/accounts/{account_id}/segments",
                web::post().to(segment_pages::create),
            )
            .route(
                "/accounts/{account_id}/segments/{segment_id}/delete",
                web::post().to(segment_pages::delete),
            )
            .route(
                "/accounts/{account_id}/contacts/import",
                web::get().to(contact_pages::import_form),
            )
            .route(
                "/accounts/{account_id}/contacts/import",
                web::post().to(contact_pages::import),
            )
            .route(
                "/accounts/{account_id}/contacts/{contact_id}",
                web::get().to(contact_pages::show),
            )
            .route(
                "/accounts/{account_id}/contacts/{contact_id}/unbounce",
                web::post().to(contact_pages::unbounce),
            )
            .route(
                "/accounts/{account_id}/contacts/{contact_id}/delete",
                web::post().to(contact_pages::delete),
            )
            .route(
                "/accounts/{account_id}/messages",
                web::get().to(log_pages::messages),
            )
            .route(
                "/accounts/{account_id}/messages/{message_id}",
                web::get().to(log_pages::message),
            )
            .route(
                "/accounts/{account_id}/messages/{message_id}/preview",
                web::get().to(log_pages::message_preview),
            )
            .route(
                "/accounts/{account_id}/webhook-events",
                web::get().to(log_pages::webhook_events),
            )
            .route(
                "/accounts/{account_id}/webhook-events/{event_id}/retry",
                web::post().to(log_pages::retry),
            )
            .route(
                "/accounts/{account_id}/topics",
                web::get().to(automation_pages::topics),
            )
            .route(
                "/accounts/{account_id}/topics",
                web::post().to(automation_pages::create_topic_form),
            )
            .route(
                "/accounts/{account_id}/topics/{topic_id}",
                web::get().to(automation_pages::topic),
            )
            .route(
                "/accounts/{account_id}/topics/{topic_id}",
                web::post().to(automation_pages::update_topic_form),
            )
            .route(
                "/accounts/{account_id}/topics/{topic_id}/delete",
                web::post().to(automation_pages::delete_topic_form),
            )
            .route(
                "/accounts/{account_id}/forms",
                web::get().to(subscribe_form_pages::forms),
            )
            .route(
                "/accounts/{account_id}/automations",
                web::get().to(automation_pages::automations),
            )
            .route(
                "/accounts/{account_id}/automations",
                web::post().to(automation_pages::create_automation_form),
            )
            .route(
                "/accounts/{account_id}/automations/new",
                web::get().to(automation_pages::new_automation),
            )
            .route(
                "/accounts/{account_id}/automations/{automation_id}",
                web::get().to(automation_pages::automation),
            )
            .route(
                "/accounts/{account_id}/automations/{automation_id}",
                web::post().to(automation_pages::update_automation_form),
            )
            .route(
                "/accounts/{account_id}/automations/{automation_id}/delete",
                web::post().to(automation_pages::delete_automation_form),
            )
            // Announcements, mail servers, template previews and test sends (consoleapi).
            .route(
                "/accounts/{account_id}/announcements",
                web::get().to(announcement_pages::list),
            )
            .route(
                "/accounts/{account_id}/announcements",
                web::post().to(announcement_pages::create),
            )
            .route(
                "/accounts/{account_id}/announcements/new",
                web::get().to(announcement_pages::new_form),
            )
            .route(
                "/accounts/{account_id}/announcements/{announcement_id}",
                web::get().to(announcement_pages::show),
            )
            .route(
                "/accounts/{account_id}/announcements/{announcement_id}/progress",
                web::get().to(announcement_pages::progress_fragment),
            )
            .route(
                "/accounts/{account_id}/announcements/{announcement_id}/pause",
                web::post().to(announcement_pages::pause_form),
            )
            .route(
                "/accounts/{account_id}/announcements/{announcement_id}/resume",
                web::post().to(announcement_pages::resume_form),
            )
            .route(
                "/accounts/{account_id}/announcements/{announcement_id}/cancel",
                web::post().to(announcement_pages::cancel_form),
            )
            .route(
                "/accounts/{account_id}/mail-servers",
                web::get().to(mail_server_pages::list),
            )
            .route(
                "/accounts/{account_id}/mail-servers",
                web::post().to(mail_server_pages::create),
            )
            .route(
                "/accounts/{account_id}/mail-servers/new",
                web::get().to(mail_server_pages::new_form),
            )
            .route(
                "/accounts/{account_id}/mail-servers/{server_id}",
                web::get().to(mail_server_pages::edit_form),
            )
            .route(
                "/accounts/{account_id}/mail-servers/{server_id}",
                web::post().to(mail_server_pages::update),
            )
            .route(
                "/accounts/{account_id}/templates/{template_id}/test-send",
                web::post().to(template_pages::send_test),
            )
            .route("/tokens", web::get().to(pages::tokens))
            .route("/tokens", web::post().to(pages::create_token))
            .route(
                "/tokens/{token_id}/revoke",
                web::post().to(pages::revoke_token),
            )
            .route(
                "/sessions/{session_id}/revoke",
                web::post().to(pages::revoke_session),
            )
            .default_service(web::to(pages::not_found)),
    );
}

async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(render::STYLESHEET)
}

async fn htmx() -> HttpResponse {
    script(render::HTMX)
}

async fn import_script() -> HttpResponse {
    script(extra_templates::IMPORT_SCRIPT)
}

async fn editor() -> HttpResponse {
    script(render::EDITOR)
}

/// One of the console's scripts, compiled into the binary (see `vendor/README.md`).
fn script(body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(body)
}

/// The prefix of the console's cookies over https. A browser stores a `__Host-` cookie only
/// when it is `Secure`, has `Path=/` and names no `Domain`, so no sibling subdomain (and no
/// page over plain http) can set one for this host: a cookie a sibling injects under the
/// plain name is never read.
const HOST_PREFIX: &str = "__Host-";

/// The value of the console cookie `name` in the request's `Cookie` headers: over https
/// only `__Host-<name>`, over http only `<name>`. A request that carries the cookie more
/// than once has none: a browser sends every cookie whose domain and path match, the most
/// specific path first, so over http a cookie a sibling subdomain set for a narrower path
/// would otherwise win, and the browser would work in whatever session the sibling chose
/// (with the prefix, a second copy can only come from a client that is not a browser).
fn cookie(req: &HttpRequest, name: &str) -> Option<String> {
    let name = cookie_name(req, name);
    let mut values = req
        .headers()
        .get_all(header::COOKIE)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(key, _)| *key == name)
        .map(|(_, value)| value);
    let first = values.next()?;
    if values.next().is_some() {
        tracing::info!(cookie = %name, "console: a cookie sent more than once is not read");
        return None;
    }
    Some(first.to_owned())
}

/// What the console cookie `name` is called on this request ([`HOST_PREFIX`] over https).
fn cookie_name(req: &HttpRequest, name: &str) -> String {
    if over_https(req) {
        format!("{HOST_PREFIX}{name}")
    } else {
        name.to_owned()
    }
}

/// Whether the request came over https (directly, or as a trusted proxy says):
/// cookies are then marked `Secure`.
fn over_https(req: &HttpRequest) -> bool {
    req.connection_info().scheme() == "https"
}

/// A `Set-Cookie` value, HttpOnly and SameSite=Strict; `max_age` 0 deletes it. Over https
/// it is `__Host-<name>`, `Secure`, `Path=/` (the prefix requires both). Over plain http,
/// where a browser keeps no `Secure` cookie except on `localhost`, it is `<name>`,
/// scoped to `Path=/console`: local development signs in on any host name, and a
/// deployment serves the console over https (docs/console.md).
fn set_cookie(req: &HttpRequest, name: &str, value: &str, max_age: i64) -> String {
    if over_https(req) {
        format!(
            "{HOST_PREFIX}{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict; Secure"
        )
    } else {
        format!("{name}={value}; Path=/console; Max-Age={max_age}; HttpOnly; SameSite=Strict")
    }
}

/// Refuses a state-changing request that a browser says came from another site: an
/// `Origin` other than this server's, or `Sec-Fetch-Site: cross-site`/`same-site`. A
/// request with neither header (not a browser) still needs its CSRF token.
fn check_same_origin(req: &HttpRequest) -> Result<(), HttpResponse> {
    let refused = || {
        pages::message(
            StatusCode::FORBIDDEN,
            "Request refused",
            "This form was sent from another site, so it was not carried out.",
            None,
        )
    };
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let info = req.connection_info();
        let own = format!("{}://{}", info.scheme(), info.host());
        if origin.to_str().map_or(true, |origin| origin != own) {
            return Err(refused());
        }
    }
    let fetch_site = req
        .headers()
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok());
    if matches!(fetch_site, Some("cross-site" | "same-site")) {
        return Err(refused());
    }
    Ok(())
}

/// Reads an `application/x-www-form-urlencoded` body; 400 with a page otherwise.
fn parse_form<T: DeserializeOwned>(body: &[u8]) -> Result<T, HttpResponse> {
    serde_urlencoded::from_bytes(body).map_err(|_| {
        pages::message(
            StatusCode::BAD_REQUEST,
            "Bad request",
            "The form could not be read.",
            None,
        )
    })
}

/// A fresh random value from the services' random source.
fn fresh_secret(services: &Services) -> ConsoleSecret {
    let mut random = [0u8; CONSOLE_SECRET_BYTES];
    services.secrets.fill_random(&mut random);
    ConsoleSecret::from_random(random)
}

/// The CSRF check of a signed-in form.
fn check_csrf(signed_in: &SignedIn, presented: &str) -> Result<(), HttpResponse> {
    let expected = ConsoleSecret::parse(&signed_in.session.csrf_token).ok();
    if expected.is_some_and(|expected| expected.matches(presented)) {
        Ok(())
    } else {
        Err(pages::message(
            StatusCode::FORBIDDEN,
            "Request refused",
            "This form is out of date or was not sent by this console. Reload the page and \
             try again.",
            None,
        ))
    }
}

/// Runs a use case on the blocking pool, as the API's handlers do, keeping its
/// [`AppError`] so the page can be chosen from it.
async fn blocking<F, R>(work: F) -> Result<R, AppError>
where
    F: FnOnce() -> Result<R, AppError> + Send + 'static,
    R: Send + 'static,
{
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(work)).await {
        Ok(result) => result,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(AppError::Unavailable("the server is shutting down".into())),
    }
}

/// What every signed-in page's layout needs.
#[derive(Debug, Serialize)]
struct Layout<'a> {
    title: &'a str,
    signed_in: bool,
    csrf: &'a str,
    section: &'a str,
}

/// Maps a use case's error to a page. `Unauthorized` on an account reads as not found,
/// so account ids cannot be probed.
fn error_page(error: &AppError) -> HttpResponse {
    match error {
        AppError::Unauthorized | AppError::NotFound => pages::message(
            StatusCode::NOT_FOUND,
            "Not found",
            "There is nothing here, or it is not yours to see.",
            Some(("/console/accounts", "Back to your accounts")),
        ),
        AppError::Forbidden(reason) => pages::message(
            StatusCode::FORBIDDEN,
            "Not allowed",
            reason,
            Some(("/console/accounts", "Back to your accounts")),
        ),
        AppError::Invalid(errors) => pages::message(
            StatusCode::BAD_REQUEST,
            "Bad request",
            &errors.to_string(),
            None,
        ),
        AppError::BadRequest(reason) => {
            pages::message(StatusCode::BAD_REQUEST, "Bad request", reason, None)
        }
        AppError::Unavailable(reason)
        | AppError::TimedOut(reason)
        | AppError::AccountUnavailable(_, reason) => {
            tracing::warn!(%reason, "console page unavailable");
            pages::message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                "The service is unavailable right now; try again in a moment.",
                None,
            )
        }
        AppError::TooManyAtOnce(reason) => {
            pages::message(StatusCode::TOO_MANY_REQUESTS, "Busy", reason, None)
        }
        AppError::Internal(cause) => {
            tracing::error!(%cause, "console page failed");
            pages::message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Error",
                "Something went wrong on our side.",
                None,
            )
        }
    }
}
