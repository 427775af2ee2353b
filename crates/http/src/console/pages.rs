//! The console's handlers: read the request, run use cases on the blocking pool, render.

use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use mailroom_app::{
    accounts::{
        create_account as create_account_use_case, get_account, list_accounts, CreateAccountRequest,
    },
    auth::{verify_membership, RouteCall},
    console::{self, SignedIn},
    contacts::count_contacts,
    mail_servers::count_mail_servers,
    messages::{count_messages, list_messages, message_stats},
    templates::count_templates,
    tokens::{
        issue_token_as, list_tokens, revoke_token as revoke_token_use_case, IssueTokenRequest,
    },
    AppError, Services,
};
use mailroom_domain::{
    console::{ConsoleSecret, SESSION_LIFETIME},
    contact::ContactQuery,
    message::{DailyStats, MessageFilter, MessageOrder, MessageStatus, StatsCounter},
    paging::PageRequest,
    token::{RawToken, TokenHash},
    AccountId, ConsoleSessionId, Timestamp, TokenId,
};
use serde::{Deserialize, Serialize};
use std::{net::IpAddr, time::Instant};

use crate::{
    auth_failures::{AuthFailureGuard, Verdict},
    pages::{Language, PageTemplates, SignInContext},
};

use super::{
    blocking, check_csrf, check_same_origin, cookie, error_page, fresh_secret,
    page_kit::{is_confirmed, Confirmation, Pairs},
    parse_form, render, set_cookie, Layout, FORM_COOKIE, SESSION_COOKIE,
};

/// How many of the last failed messages the dashboard lists.
const LAST_FAILURES: u32 = 10;

/// A page that says one thing, with an optional link onwards.
pub(super) fn message(
    status: StatusCode,
    title: &str,
    text: &str,
    back: Option<(&str, &str)>,
) -> HttpResponse {
    let (back_href, back_label) = back.unwrap_or(("/console", "Back to the console"));
    render::page(
        status,
        "message.html",
        minijinja::context! {
            title => title, message => text, back_href => back_href, back_label => back_label,
        },
    )
    .into()
}

pub(super) fn see_other(location: &str) -> HttpResponse {
    let mut response = HttpResponse::SeeOther();
    render::secure_headers(&mut response);
    response
        .insert_header((header::LOCATION, location.to_owned()))
        .finish()
}

fn services(req: &HttpRequest) -> Result<Services, HttpResponse> {
    req.app_data::<web::Data<Services>>()
        .map(|data| data.get_ref().clone())
        .ok_or_else(|| error_page(&AppError::Internal("services not registered".into())))
}

fn user_agent(req: &HttpRequest) -> String {
    req.headers()
        .get(header::USER_AGENT)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .chars()
        .take(console::MAX_USER_AGENT_CHARS)
        .collect()
}

/// The signed-in browser, or `None` without a live session.
async fn session(req: &HttpRequest, services: &Services) -> Result<Option<SignedIn>, HttpResponse> {
    let Some(value) = cookie(req, SESSION_COOKIE) else {
        return Ok(None);
    };
    let services = services.clone();
    match blocking(move || console::authenticate_session(&services, &value)).await {
        Ok(signed_in) => Ok(Some(signed_in)),
        Err(AppError::Unauthorized) => Ok(None),
        Err(error) => Err(error_page(&error)),
    }
}

/// The signed-in browser; without one, a redirect to the sign-in page.
pub(super) async fn require_session(
    req: &HttpRequest,
) -> Result<(Services, SignedIn), HttpResponse> {
    let services = services(req)?;
    match session(req, &services).await? {
        Some(signed_in) => Ok((services, signed_in)),
        None => Err(see_other("/console/sign-in")),
    }
}

/// A state-changing request of a signed-in browser: same origin, live session, then the
/// form with its CSRF token.
pub(super) async fn signed_in_form<T: for<'de> Deserialize<'de> + CsrfForm>(
    req: &HttpRequest,
    body: &[u8],
) -> Result<(Services, SignedIn, T), HttpResponse> {
    check_same_origin(req)?;
    let (services, signed_in) = require_session(req).await?;
    let form: T = parse_form(body)?;
    check_csrf(&signed_in, form.csrf())?;
    Ok((services, signed_in, form))
}

/// A form that carries the session's CSRF token.
pub(super) trait CsrfForm {
    fn csrf(&self) -> &str;
}

macro_rules! csrf_form {
    ($name:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        #[derive(Debug, Deserialize)]
        struct $name {
            #[serde(default)]
            csrf: String,
            $(#[serde(default)] $field: $ty,)*
        }
        impl CsrfForm for $name {
            fn csrf(&self) -> &str {
                &self.csrf
            }
        }
    };
}

csrf_form!(CsrfOnly {});
csrf_form!(NewAccountForm { name: String });
csrf_form!(NewTokenForm {
    name: String,
    expires_in_days: String
});

fn with_form_cookie(
    req: &HttpRequest,
    mut response: HttpResponse,
    token: &ConsoleSecret,
) -> HttpResponse {
    if let Ok(value) =
        header::HeaderValue::from_str(&set_cookie(req, FORM_COOKIE, token.expose(), 3600))
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn signed_in_response(req: &HttpRequest, secret: &ConsoleSecret) -> HttpResponse {
    let mut response = see_other("/console/accounts");
    let cookies = [
        set_cookie(
            req,
            SESSION_COOKIE,
            secret.expose(),
            SESSION_LIFETIME.whole_seconds(),
        ),
        set_cookie(req, FORM_COOKIE, "", 0),
    ];
    for value in cookies {
        if let Ok(value) = header::HeaderValue::from_str(&value) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The API's failed-authentication guard, shared by the sign-in forms: a pasted token or
/// a login link that fails counts against the client address as a bad bearer token does,
/// and an address over its allowance is refused before any lookup.
struct SignInGuard {
    guard: Option<web::Data<AuthFailureGuard>>,
    client: Option<IpAddr>,
}

impl SignInGuard {
    fn of(req: &HttpRequest) -> Self {
        let guard = req.app_data::<web::Data<AuthFailureGuard>>().cloned();
        let client = guard.as_ref().and_then(|guard| guard.client_key(req));
        Self { guard, client }
    }

    fn refused(retry_after_secs: u64) -> HttpResponse {
        let mut response = message(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many failed sign-ins",
            "Too many sign-ins from this address failed. Wait a little and try again.",
            Some(("/console/sign-in", "Back to sign-in")),
        );
        if let Ok(value) = header::HeaderValue::from_str(&retry_after_secs.max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }

    /// Refuses an address over its allowance, unless `credential` worked lately.
    fn before(&self, credential: &TokenHash) -> Result<(), HttpResponse> {
        match &self.guard {
            Some(guard) => match guard.before_lookup(self.client, credential, Instant::now()) {
                Verdict::Refuse(retry_after) => Err(Self::refused(retry_after)),
                Verdict::Lookup => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// Counts a failure; the refusal page when it used up the allowance.
    fn failed(&self) -> Option<HttpResponse> {
        let decision = self.guard.as_ref()?.failed(self.client, Instant::now())?;
        Some(Self::refused(decision.retry_after_secs))
    }

    fn succeeded(&self, credential: &TokenHash) {
        if let Some(guard) = &self.guard {
            guard.succeeded(credential, Instant::now());
        }
    }
}

/// The sign-in forms' token must match their cookie.
fn check_form_cookie(req: &HttpRequest, presented: &str) -> Result<(), HttpResponse> {
    let expected = cookie(req, FORM_COOKIE).and_then(|value| ConsoleSecret::parse(&value).ok());
    if expected.is_some_and(|expected| expected.matches(presented)) {
        Ok(())
    } else {
        Err(message(
            StatusCode::FORBIDDEN,
            "Request refused",
            "This sign-in form is out of date or was not sent by this console. Reload the \
             page and try again.",
            Some(("/console/sign-in", "Back to sign-in")),
        ))
    }
}

fn unwrap(result: Result<HttpResponse, HttpResponse>) -> HttpResponse {
    result.unwrap_or_else(|response| response)
}

/// `GET /console`: the accounts when signed in, else the sign-in page.
pub(super) async fn home(req: HttpRequest) -> HttpResponse {
    unwrap(
        async {
            let services = services(&req)?;
            Ok(match session(&req, &services).await? {
                Some(_) => see_other("/console/accounts"),
                None => see_other("/console/sign-in"),
            })
        }
        .await,
    )
}

/// Any other `/console` path.
pub(super) async fn not_found() -> HttpResponse {
    error_page(&AppError::NotFound)
}

/// The sign-in form, from the public pages' `sign_in.html` (which the operator may
/// override) in the browser's language; `error` is a catalogue key.
fn sign_in_page(
    req: &HttpRequest,
    services: &Services,
    status: StatusCode,
    error: Option<&str>,
) -> HttpResponse {
    let token = fresh_secret(services);
    let Some(templates) = req.app_data::<web::Data<PageTemplates>>() else {
        return error_page(&AppError::Internal("page templates not configured".into()));
    };
    let language = Language::of_request(req);
    let body = templates.render(
        crate::pages::SIGN_IN,
        language,
        SignInContext {
            form_token: token.expose().to_owned(),
            error: error.map(|key| templates.text(language, key)),
        },
    );
    let mut page: HttpResponse = render::layout(
        status,
        crate::pages::SIGN_IN,
        body,
        minijinja::context! {
            title => templates.text(language, "sign_in_title"),
            lang => language.tag(),
            t => templates.catalogue(language),
        },
    )
    .into();
    page.headers_mut().insert(
        header::CONTENT_LANGUAGE,
        header::HeaderValue::from_static(language.tag()),
    );
    page.headers_mut().insert(
        header::VARY,
        header::HeaderValue::from_static("Accept-Language"),
    );
    with_form_cookie(req, page, &token)
}

/// `GET /console/sign-in`.
pub(super) async fn sign_in_form(req: HttpRequest) -> HttpResponse {
    unwrap(
        async {
            let services = services(&req)?;
            if session(&req, &services).await?.is_some() {
                return Ok(see_other("/console/accounts"));
            }
            Ok(sign_in_page(&req, &services, StatusCode::OK, None))
        }
        .await,
    )
}

#[derive(Debug, Deserialize)]
struct SignInForm {
    #[serde(default)]
    form_token: String,
    #[serde(default)]
    token: String,
}

/// `POST /console/sign-in`: a pasted token becomes a session.
pub(super) async fn sign_in(req: HttpRequest, body: web::Bytes) -> HttpResponse {
    unwrap(
        async {
            check_same_origin(&req)?;
            let services = services(&req)?;
            let form: SignInForm = parse_form(&body)?;
            check_form_cookie(&req, &form.form_token)?;
            let guard = SignInGuard::of(&req);
            // A value not shaped like a token is refused by the use case without a lookup.
            let credential = RawToken::parse(form.token.trim())
                .ok()
                .map(|raw| raw.hash());
            if let Some(credential) = &credential {
                guard.before(credential)?;
            }
            let agent = user_agent(&req);
            let work = services.clone();
            let opened =
                blocking(move || console::sign_in_with_token(&work, &form.token, &agent)).await;
            if let (Ok(_), Some(credential)) = (&opened, &credential) {
                guard.succeeded(credential);
            }
            if matches!(opened, Err(AppError::Unauthorized)) {
                if let Some(refusal) = guard.failed() {
                    return Ok(refusal);
                }
            }
            Ok(match opened {
                Ok(session) => signed_in_response(&req, &session.secret),
                Err(AppError::Invalid(_)) => sign_in_page(
                    &req,
                    &services,
                    StatusCode::BAD_REQUEST,
                    Some("sign_in_error_invalid"),
                ),
                Err(AppError::Unauthorized) => sign_in_page(
                    &req,
                    &services,
                    StatusCode::UNAUTHORIZED,
                    Some("sign_in_error_unknown"),
                ),
                Err(AppError::Forbidden(_)) => sign_in_page(
                    &req,
                    &services,
                    StatusCode::FORBIDDEN,
                    Some("sign_in_error_sending"),
                ),
                Err(error) => error_page(&error),
            })
        }
        .await,
    )
}

/// `GET /console/login/{link}`: asks to confirm, so a link opened by a mail scanner or a
/// preview is not used up.
pub(super) async fn login_link_form(req: HttpRequest, link: web::Path<String>) -> HttpResponse {
    unwrap(
        async {
            let services = services(&req)?;
            if ConsoleSecret::parse(&link).is_err() {
                return Err(error_page(&AppError::NotFound));
            }
            let token = fresh_secret(&services);
            let page: HttpResponse = render::page(
                StatusCode::OK,
                "login_link.html",
                minijinja::context! {
                    title => "Sign in with a link",
                    action => format!("/console/login/{}", link.as_str()),
                    form_token => token.expose(),
                },
            )
            .into();
            Ok(with_form_cookie(&req, page, &token))
        }
        .await,
    )
}

#[derive(Debug, Deserialize)]
struct LoginLinkForm {
    #[serde(default)]
    form_token: String,
}

/// `POST /console/login/{link}`: uses the link up and opens a session.
pub(super) async fn login_link(
    req: HttpRequest,
    link: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    unwrap(
        async {
            check_same_origin(&req)?;
            let services = services(&req)?;
            let form: LoginLinkForm = parse_form(&body)?;
            check_form_cookie(&req, &form.form_token)?;
            let agent = user_agent(&req);
            let link = link.into_inner();
            let opened =
                blocking(move || console::sign_in_with_link(&services, &link, &agent)).await;
            Ok(match opened {
                Ok(session) => signed_in_response(&req, &session.secret),
                Err(AppError::Unauthorized) => message(
                    StatusCode::UNAUTHORIZED,
                    "Link not valid",
                    "This sign-in link is unknown, was already used, or has expired. Ask your \
                 operator for a new one.",
                    Some(("/console/sign-in", "Sign in with a token")),
                ),
                Err(error) => error_page(&error),
            })
        }
        .await,
    )
}

/// `POST /console/sign-out`.
pub(super) async fn sign_out(req: HttpRequest, body: web::Bytes) -> HttpResponse {
    unwrap(
        async {
            let (services, signed_in, _form) = signed_in_form::<CsrfOnly>(&req, &body).await?;
            let id = signed_in.session.id;
            blocking(move || console::revoke_session(&services, &signed_in.actor, id))
                .await
                .map_err(|error| error_page(&error))?;
            Ok(signed_out(&req))
        }
        .await,
    )
}

fn signed_out(req: &HttpRequest) -> HttpResponse {
    let mut response = see_other("/console/sign-in");
    if let Ok(value) = header::HeaderValue::from_str(&set_cookie(req, SESSION_COOKIE, "", 0)) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

#[derive(Debug, Serialize)]
pub(super) struct AccountItem {
    id: String,
    name: String,
    created_at: String,
}

pub(super) fn day_and_minute(at: Timestamp) -> String {
    let at = at.as_datetime();
    format!("{} {:02}:{:02} UTC", at.date(), at.hour(), at.minute())
}

pub(super) fn account_items(
    services: &Services,
    signed_in: &SignedIn,
) -> Result<Vec<AccountItem>, AppError> {
    Ok(list_accounts(services, &signed_in.actor)?
        .into_iter()
        .map(|account| AccountItem {
            id: account.id.to_string(),
            name: account.name.as_str().to_owned(),
            created_at: day_and_minute(account.created_at),
        })
        .collect())
}

fn accounts_page(
    signed_in: &SignedIn,
    accounts: &[AccountItem],
    status: StatusCode,
    name: Option<&str>,
    error: Option<&str>,
) -> render::Page {
    render::page(
        status,
        "accounts.html",
        minijinja::context! {
            ..minijinja::Value::from_serialize(Layout {
                title: "Accounts", signed_in: true, csrf: &signed_in.session.csrf_token,
                section: "accounts",
            }),
            ..minijinja::context! {
                switcher => accounts, accounts => accounts, name => name, error => error,
            }
        },
    )
}

/// `GET /console/accounts`: the accounts the user is a member of, and a form to create one.
pub(super) async fn accounts(req: HttpRequest) -> HttpResponse {
    unwrap(
        async {
            let (services, signed_in) = require_session(&req).await?;
            let (signed_in, accounts) = blocking(move || {
                let accounts = account_items(&services, &signed_in)?;
                Ok((signed_in, accounts))
            })
            .await
            .map_err(|error| error_page(&error))?;
            Ok(accounts_page(&signed_in, &accounts, StatusCode::OK, None, None).into())
        }
        .await,
    )
}

/// `POST /console/accounts`: creates an account owned by the user.
pub(super) async fn create_account(req: HttpRequest, body: web::Bytes) -> HttpResponse {
    unwrap(
        async {
            let (services, signed_in, form) = signed_in_form::<NewAccountForm>(&req, &body).await?;
            let outcome = blocking(move || {
                let created = create_account_use_case(
                    &services,
                    &signed_in.actor,
                    CreateAccountRequest {
                        name: Some(form.name.clone()),
                        click_tracking: None,
                        open_tracking: None,
                    },
                );
                match created {
                    Ok(account) => Ok(Ok(account.id)),
                    Err(AppError::Invalid(errors)) => {
                        let accounts = account_items(&services, &signed_in)?;
                        Ok(Err((signed_in, accounts, form.name, errors.to_string())))
                    }
                    Err(other) => Err(other),
                }
            })
            .await
            .map_err(|error| error_page(&error))?;
            Ok(match outcome {
                Ok(id) => see_other(&format!("/console/accounts/{id}")),
                Err((signed_in, accounts, name, error)) => accounts_page(
                    &signed_in,
                    &accounts,
                    StatusCode::BAD_REQUEST,
                    Some(&name),
                    Some(&error),
                )
                .into(),
            })
        }
        .await,
    )
}

#[derive(Debug, Serialize)]
struct FailureItem {
    id: String,
    status: &'static str,
    updated_at: String,
    email: String,
    attempts: u32,
    reply: String,
}

/// One step of the dashboard's first-run checklist.
#[derive(Debug, Serialize)]
struct ChecklistStep {
    label: &'static str,
    href: String,
    done: bool,
    /// Where the account stands on it ("2 contacts", "no mail server yet").
    detail: String,
}

/// The steps from a new account to its first send: a mail server, a template, contacts,
/// then mail. `sent` counts the last 30 days (the stats the dashboard has read).
fn checklist(
    account: AccountId,
    (servers, templates, contacts): (u64, u64, u64),
    sent: u64,
    queued: u64,
) -> Vec<ChecklistStep> {
    let base = format!("/console/accounts/{account}");
    let counted = |n: u64, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    vec![
        ChecklistStep {
            label: "Add the mail server that sends your mail",
            href: format!("{base}/mail-servers/new"),
            done: servers > 0,
            detail: if servers > 0 {
                counted(servers, "mail server", "mail servers")
            } else {
                "no mail server yet: nothing can be sent".to_owned()
            },
        },
        ChecklistStep {
            label: "Write a template (the starter ones are there to edit)",
            href: format!("{base}/templates"),
            done: templates > 0,
            detail: counted(templates, "template", "templates"),
        },
        ChecklistStep {
            label: "Add contacts, or import them from a CSV file",
            href: format!("{base}/contacts/import"),
            done: contacts > 0,
            detail: counted(contacts, "contact", "contacts"),
        },
        ChecklistStep {
            label: "Send an announcement, or your product's first transactional email",
            href: format!("{base}/announcements/new"),
            done: sent > 0 || queued > 0,
            detail: if sent > 0 {
                format!(
                    "{} in the last 30 days",
                    counted(sent, "message sent", "messages sent")
                )
            } else if queued > 0 {
                counted(
                    queued,
                    "message waiting to be sent",
                    "messages waiting to be sent",
                )
            } else {
                "nothing sent in the last 30 days".to_owned()
            },
        },
    ]
}

/// The last 30 days' rates, each a share of the messages sent; `None` with none sent.
#[derive(Debug, Serialize)]
struct Rates {
    opened: String,
    clicked: String,
    bounced: String,
    complained: String,
}

fn rates(stats: &[DailyStats]) -> Option<Rates> {
    let total = |counter: StatsCounter| stats.iter().map(|day| day.get(counter)).sum::<u64>();
    let sent = total(StatsCounter::Sent);
    if sent == 0 {
        return None;
    }
    #[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
    let share =
        |counter: StatsCounter| format!("{:.1} %", total(counter) as f64 * 100.0 / sent as f64);
    Some(Rates {
        opened: share(StatsCounter::Opened),
        clicked: share(StatsCounter::Clicked),
        bounced: share(StatsCounter::Bounced),
        complained: share(StatsCounter::Complained),
    })
}

/// `GET /console/accounts/{id}`: the dashboard of one account the user is a member of.
pub(super) async fn dashboard(req: HttpRequest, account_id: web::Path<String>) -> HttpResponse {
    unwrap(
        async {
            let (services, signed_in) = require_session(&req).await?;
            let account =
                AccountId::parse(&account_id).map_err(|_| error_page(&AppError::NotFound))?;
            let path = format!("/v2/accounts/{account}");
            let rendered = blocking(move || {
                // The same proof every account-scoped API route needs; the dashboard reads
                // what `GET /v2/accounts/{accountId}` and its stats and messages routes read.
                let call = RouteCall {
                    method: "GET",
                    path: &path,
                    query: "",
                };
                let member = verify_membership(&services, &signed_in.actor, account, call)?;
                let details = get_account(&services, &member)?;
                let stats = message_stats(&services, &member)?;
                let queued = count_messages(
                    &services,
                    &member,
                    &MessageFilter {
                        status: Some(MessageStatus::Queued),
                        ..MessageFilter::default()
                    },
                )?;
                // A hard bounce is a failure to the person reading the dashboard too: the
                // newest of each, merged by when they ended.
                let mut failures = Vec::new();
                for status in [MessageStatus::Failed, MessageStatus::Bounced] {
                    failures.extend(list_messages(
                        &services,
                        &member,
                        &MessageFilter {
                            status: Some(status),
                            ..MessageFilter::default()
                        },
                        MessageOrder::NewestFirst,
                        PageRequest {
                            start: 0,
                            limit: LAST_FAILURES,
                        },
                    )?);
                }
                failures.sort_by_key(|message| std::cmp::Reverse(message.updated_at));
                failures.truncate(LAST_FAILURES as usize);
                let sent: u64 = stats.iter().map(|day| day.get(StatsCounter::Sent)).sum();
                let contacts = count_contacts(&services, &member, &ContactQuery::default())?;
                let steps = checklist(
                    account,
                    (
                        count_mail_servers(&services, &member)?,
                        count_templates(&services, &member)?,
                        contacts,
                    ),
                    sent,
                    queued,
                );
                let first_run = steps.iter().any(|step| !step.done).then_some(steps);
                let switcher = account_items(&services, &signed_in)?;
                let failures: Vec<FailureItem> = failures
                    .into_iter()
                    .map(|message| FailureItem {
                        id: message.id.to_string(),
                        status: message.status.as_str(),
                        updated_at: day_and_minute(message.updated_at),
                        email: message.email,
                        attempts: message.attempts,
                        reply: message
                            .last_reply
                            .unwrap_or_else(|| "(no reply)".to_owned()),
                    })
                    .collect();
                let title = details.name.as_str().to_owned();
                Ok(render::page(
                    StatusCode::OK,
                    "dashboard.html",
                    minijinja::context! {
                        ..minijinja::Value::from_serialize(Layout {
                            title: &title, signed_in: true, csrf: &signed_in.session.csrf_token,
                            section: "accounts",
                        }),
                        ..minijinja::context! {
                            switcher => switcher,
                            current_account => account.to_string(),
                            account => minijinja::context! { name => title },
                            chart => minijinja::Value::from_serialize(render::Chart::new(&stats)),
                            queued => queued,
                            failures => failures,
                            checklist => first_run,
                            contacts => contacts,
                            rates => rates(&stats),
                        }
                    },
                ))
            })
            .await;
            rendered
                .map(HttpResponse::from)
                .map_err(|error| error_page(&error))
        }
        .await,
    )
}

#[derive(Debug, Serialize)]
struct TokenItem {
    id: String,
    name: String,
    scope: &'static str,
    created_at: String,
    expires_at: Option<String>,
    last_used_at: Option<String>,
}

#[derive(Debug, Serialize)]
struct SessionItem {
    id: String,
    current: bool,
    via: &'static str,
    user_agent: String,
    created_at: String,
    expires_at: String,
}

#[derive(Debug, Serialize)]
struct NewToken {
    name: String,
    value: String,
}

struct TokensView {
    tokens: Vec<TokenItem>,
    sessions: Vec<SessionItem>,
}

fn tokens_view(services: &Services, signed_in: &SignedIn) -> Result<TokensView, AppError> {
    let tokens = list_tokens(services, &signed_in.actor)?
        .into_iter()
        .map(|token| TokenItem {
            id: token.id.to_string(),
            name: token.name,
            scope: token.scope.as_str(),
            created_at: day_and_minute(token.created_at),
            expires_at: token.expires_at.map(day_and_minute),
            last_used_at: token.last_used_at.map(day_and_minute),
        })
        .collect();
    let sessions = console::list_sessions(services, &signed_in.actor)?
        .into_iter()
        .map(|session| SessionItem {
            id: session.id.to_string(),
            current: session.id == signed_in.session.id,
            via: if session.token_id.is_some() {
                "a token"
            } else {
                "a login link"
            },
            user_agent: session.user_agent,
            created_at: day_and_minute(session.created_at),
            expires_at: day_and_minute(session.expires_at),
        })
        .collect();
    Ok(TokensView { tokens, sessions })
}

fn tokens_page(
    signed_in: &SignedIn,
    view: TokensView,
    status: StatusCode,
    new_token: Option<NewToken>,
    name: Option<&str>,
    error: Option<&str>,
) -> render::Page {
    render::page(
        status,
        "tokens.html",
        minijinja::context! {
            ..minijinja::Value::from_serialize(Layout {
                title: "Tokens and sessions", signed_in: true,
                csrf: &signed_in.session.csrf_token, section: "tokens",
            }),
            ..minijinja::context! {
                tokens => view.tokens, sessions => view.sessions,
                new_token => new_token, name => name, error => error,
            }
        },
    )
}

/// `GET /console/tokens`: the user's tokens and console sessions.
pub(super) async fn tokens(req: HttpRequest) -> HttpResponse {
    unwrap(
        async {
            let (services, signed_in) = require_session(&req).await?;
            blocking(move || {
                let view = tokens_view(&services, &signed_in)?;
                Ok(tokens_page(
                    &signed_in,
                    view,
                    StatusCode::OK,
                    None,
                    None,
                    None,
                ))
            })
            .await
            .map(HttpResponse::from)
            .map_err(|error| error_page(&error))
        }
        .await,
    )
}

/// `POST /console/tokens`: issues a token and shows its value this once. It gets the
/// session's scope and pins (a session opened with a token mints within that token).
pub(super) async fn create_token(req: HttpRequest, body: web::Bytes) -> HttpResponse {
    unwrap(
        async {
            let (services, signed_in, form) = signed_in_form::<NewTokenForm>(&req, &body).await?;
            blocking(move || {
                let expires_in_days = match form.expires_in_days.as_str() {
                    "" => None,
                    days => Some(days.parse::<i64>().map_err(|_| {
                        AppError::invalid(
                            "expiresInDays",
                            "must be 30, 60 or 90, or empty for never",
                        )
                    })?),
                };
                let issued = issue_token_as(
                    &services,
                    &signed_in.actor,
                    IssueTokenRequest {
                        name: Some(form.name.clone()),
                        expires_in_days,
                        scope: Some(signed_in.actor.scope.as_str().to_owned()),
                        account_ids: signed_in
                            .actor
                            .account_ids
                            .as_ref()
                            .map(|ids| ids.iter().map(ToString::to_string).collect()),
                    },
                );
                let view = tokens_view(&services, &signed_in)?;
                Ok(match issued {
                    Ok(issued) => tokens_page(
                        &signed_in,
                        view,
                        StatusCode::CREATED,
                        Some(NewToken {
                            name: issued.record.name,
                            value: issued.raw.expose().to_owned(),
                        }),
                        None,
                        None,
                    ),
                    Err(AppError::Invalid(errors)) => tokens_page(
                        &signed_in,
                        view,
                        StatusCode::BAD_REQUEST,
                        None,
                        Some(&form.name),
                        Some(&errors.to_string()),
                    ),
                    Err(other) => return Err(other),
                })
            })
            .await
            .map(HttpResponse::from)
            .map_err(|error| error_page(&error))
        }
        .await,
    )
}

/// The second step of a revocation on the tokens page, in the console's layout.
fn tokens_confirmation(signed_in: &SignedIn, confirmation: &Confirmation) -> HttpResponse {
    render::page(
        StatusCode::OK,
        "confirm.html",
        minijinja::context! {
            ..minijinja::Value::from_serialize(Layout {
                title: &confirmation.title, signed_in: true,
                csrf: &signed_in.session.csrf_token, section: "tokens",
            }),
            ..minijinja::context! { confirmation => confirmation }
        },
    )
    .into()
}

/// `POST /console/tokens/{id}/revoke`: first the confirmation that names the token, then
/// (with `confirmed=yes`) the revocation.
pub(super) async fn revoke_token(
    req: HttpRequest,
    token: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    unwrap(
        async {
            let (services, signed_in, form) = signed_in_form::<Pairs>(&req, &body).await?;
            let token = TokenId::parse(&token).map_err(|_| error_page(&AppError::NotFound))?;
            if !is_confirmed(&form) {
                let lookup = (services.clone(), signed_in.actor.clone());
                let found = blocking(move || list_tokens(&lookup.0, &lookup.1))
                    .await
                    .map_err(|error| error_page(&error))?
                    .into_iter()
                    .find(|record| record.id == token)
                    .ok_or_else(|| error_page(&AppError::NotFound))?;
                return Ok(tokens_confirmation(
                    &signed_in,
                    &Confirmation {
                        title: "Revoke this token?".into(),
                        what: format!("The token “{}” ({})", found.name, found.scope.as_str()),
                        consequence: "Every program using it is refused from now on, and \
                                      console sessions opened with it end. It cannot be \
                                      brought back; make a new one instead."
                            .into(),
                        button: "Revoke the token".into(),
                        cancel: "/console/tokens".into(),
                    },
                ));
            }
            blocking(move || revoke_token_use_case(&services, &signed_in.actor, token))
                .await
                .map_err(|error| error_page(&error))?;
            Ok(see_other("/console/tokens"))
        }
        .await,
    )
}

/// `POST /console/sessions/{id}/revoke`: ends a session (ending one's own signs out),
/// after a confirmation.
pub(super) async fn revoke_session(
    req: HttpRequest,
    session: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    unwrap(
        async {
            let (services, signed_in, form) = signed_in_form::<Pairs>(&req, &body).await?;
            let session =
                ConsoleSessionId::parse(&session).map_err(|_| error_page(&AppError::NotFound))?;
            let own = session == signed_in.session.id;
            if !is_confirmed(&form) {
                let what = if own {
                    "This session, the one you are using: you will be signed out."
                } else {
                    "Another console session of yours."
                };
                return Ok(tokens_confirmation(
                    &signed_in,
                    &Confirmation {
                        title: "End this session?".into(),
                        what: what.into(),
                        consequence: "The browser that holds it must sign in again.".into(),
                        button: "End the session".into(),
                        cancel: "/console/tokens".into(),
                    },
                ));
            }
            blocking(move || console::revoke_session(&services, &signed_in.actor, session))
                .await
                .map_err(|error| error_page(&error))?;
            Ok(if own {
                signed_out(&req)
            } else {
                see_other("/console/tokens")
            })
        }
        .await,
    )
}
