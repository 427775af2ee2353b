//! What the account pages of `settings_pages`, `contact_pages` and `log_pages` share: the
//! membership proof for the API route a page stands for, the layout with the account
//! switcher, fragments for htmx, paging links, and the second step of a destructive form.

use actix_web::{http::StatusCode, HttpRequest, HttpResponse};
use mailroom_app::{
    auth::{verify_membership, Member, RouteCall},
    console::SignedIn,
    AppError, Services,
};
use mailroom_domain::{paging::PageRequest, AccountId};
use serde::Serialize;

use super::{
    error_page,
    pages::{account_items, require_session, signed_in_form, CsrfForm},
    render, Layout,
};

/// Rows per page of the console's lists (the API's largest page).
pub(super) const PAGE_ROWS: u32 = 50;

/// The deepest offset a list page goes to: past it, filters narrow the list instead of
/// an offset scan that grows with the page number.
pub(super) const MAX_START: u64 = 10_000;

/// The same proof, for the same call, as the API route `method path` that the page
/// stands for (`path` below `/v2/accounts/{id}`, e.g. `/contacts`).
pub(super) fn member(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    method: &str,
    path: &str,
) -> Result<Member, AppError> {
    let path = format!("/v2/accounts/{account}{path}");
    let call = RouteCall {
        method,
        path: &path,
        query: "",
    };
    verify_membership(services, &signed_in.actor, account, call)
}

/// An account id from the URL; anything else reads as not found.
pub(super) fn account_id(text: &str) -> Result<AccountId, HttpResponse> {
    AccountId::parse(text).map_err(|_| error_page(&AppError::NotFound))
}

/// The account id and the record id of a path like `…/accounts/{id}/topics/{topicId}`;
/// either malformed is the console's 404, like an unknown one.
pub(super) fn record_ids<T, E>(
    account: &str,
    record: &str,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<(AccountId, T), HttpResponse> {
    let account = account_id(account)?;
    let record = parse(record).map_err(|_| error_page(&AppError::NotFound))?;
    Ok((account, record))
}

/// The preamble of an account page's `GET`: a live session (else the sign-in page), then
/// the account id of the path (else a 404). Membership is checked by the page, in its
/// blocking work.
pub(super) async fn account_session(
    req: &HttpRequest,
    account: &str,
) -> Result<(Services, SignedIn, AccountId), HttpResponse> {
    let (services, signed_in) = require_session(req).await?;
    Ok((services, signed_in, account_id(account)?))
}

/// The preamble of an account form's `POST`: same origin, a live session and the form
/// with its CSRF token ([`signed_in_form`]), then the account id of the path (else a 404).
pub(super) async fn account_form<F: for<'de> serde::Deserialize<'de> + CsrfForm>(
    req: &HttpRequest,
    body: &[u8],
    account: &str,
) -> Result<(Services, SignedIn, F, AccountId), HttpResponse> {
    let (services, signed_in, form) = signed_in_form::<F>(req, body).await?;
    Ok((services, signed_in, form, account_id(account)?))
}

/// [`account_form`] for a path that also names a record (`…/{id}/topics/{topicId}`):
/// both ids as [`record_ids`] reads them.
pub(super) async fn record_form<F: for<'de> serde::Deserialize<'de> + CsrfForm, T, E>(
    req: &HttpRequest,
    body: &[u8],
    account: &str,
    record: &str,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<(Services, SignedIn, F, (AccountId, T)), HttpResponse> {
    let (services, signed_in, form) = signed_in_form::<F>(req, body).await?;
    Ok((
        services,
        signed_in,
        form,
        record_ids(account, record, parse)?,
    ))
}

/// The layout of an account page: title, CSRF token, the account switcher and the
/// account's own navigation (`account_section` marks the current entry).
pub(super) fn account_layout(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    title: &str,
    account_section: &str,
) -> Result<minijinja::Value, AppError> {
    let switcher = account_items(services, signed_in)?;
    Ok(minijinja::context! {
        ..minijinja::Value::from_serialize(Layout {
            title,
            signed_in: true,
            csrf: &signed_in.session.csrf_token,
            section: "accounts",
        }),
        ..minijinja::context! {
            switcher => switcher,
            current_account => account.to_string(),
            account_section => account_section,
        }
    })
}

/// Renders an account page: `context` over the account layout.
pub(super) fn account_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    status: StatusCode,
    template: &str,
    (title, account_section): (&str, &str),
    context: minijinja::Value,
) -> Result<render::Page, AppError> {
    let layout = account_layout(services, signed_in, account, title, account_section)?;
    Ok(render::page(
        status,
        template,
        minijinja::context! { ..context, ..layout },
    ))
}

/// What a destructive form's second step names: the page a first post answers, so that
/// nothing goes on one click. Its form posts the same fields back with `confirmed=yes`.
#[derive(Debug, Serialize)]
pub(super) struct Confirmation {
    /// The question, as the page's heading ("Delete this contact?").
    pub(super) title: String,
    /// What goes: its name, address or description.
    pub(super) what: String,
    /// What else goes with it, and what stays.
    pub(super) consequence: String,
    /// The label of the button that does it.
    pub(super) button: String,
    /// Where "cancel" leads (the record's page).
    pub(super) cancel: String,
}

/// Whether a destructive form is its second step, the one [`Confirmation`] asked for.
pub(super) fn is_confirmed(form: &Pairs) -> bool {
    form.get("confirmed") == Some("yes")
}

/// The second step of an account's destructive form, in the account's layout.
pub(super) fn confirmation_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    account_section: &str,
    confirmation: &Confirmation,
) -> Result<render::Page, AppError> {
    account_page(
        services,
        signed_in,
        account,
        StatusCode::OK,
        "confirm.html",
        (&confirmation.title, account_section),
        minijinja::context! { confirmation => confirmation },
    )
}

/// A page that says what an account's action did, in the account's layout (its header
/// and navigation stay), with a link onwards.
pub(super) fn done_page(
    services: &Services,
    signed_in: &SignedIn,
    account: AccountId,
    account_section: &str,
    (title, text): (&str, &str),
    (back_href, back_label): (&str, &str),
) -> Result<render::Page, AppError> {
    account_page(
        services,
        signed_in,
        account,
        StatusCode::OK,
        "message.html",
        (title, account_section),
        minijinja::context! {
            title => title, message => text, back_href => back_href, back_label => back_label,
        },
    )
}

/// The page a `start` offset asks for, clamped to [`MAX_START`].
pub(super) fn page_at(start: Option<u64>) -> PageRequest {
    PageRequest {
        start: start.unwrap_or(0).min(MAX_START),
        limit: PAGE_ROWS,
    }
}

/// Links to the previous and next pages of a list: the next one only when this page was
/// full and the offset bound is not reached. `query` is the rest of the query string.
#[derive(Debug, Serialize)]
pub(super) struct Pager {
    previous: Option<String>,
    next: Option<String>,
    first_row: u64,
    last_row: u64,
}

impl Pager {
    pub(super) fn new(page: PageRequest, shown: usize, query: &str) -> Self {
        let link = |start: u64| format!("?start={start}{query}");
        let full = shown >= page.limit as usize;
        let next_start = page.start + u64::from(page.limit);
        Self {
            previous: (page.start > 0)
                .then(|| link(page.start.saturating_sub(u64::from(page.limit)))),
            next: (full && next_start <= MAX_START).then(|| link(next_start)),
            first_row: if shown == 0 { 0 } else { page.start + 1 },
            last_row: page.start + shown as u64,
        }
    }
}

/// `&key=value` for each filter that is set, URL-encoded, for paging links.
pub(super) fn query_tail(pairs: &[(&str, Option<&str>)]) -> String {
    let set: Vec<(&str, &str)> = pairs
        .iter()
        .filter_map(|(key, value)| value.filter(|v| !v.is_empty()).map(|v| (*key, v)))
        .collect();
    if set.is_empty() {
        return String::new();
    }
    format!("&{}", serde_urlencoded::to_string(set).unwrap_or_default())
}

/// A use case's answer as a response: the page, or the error's page.
pub(super) fn respond(result: Result<render::Page, AppError>) -> HttpResponse {
    result.map_or_else(|error| error_page(&error), HttpResponse::from)
}

/// A form read as its name–value pairs, in order, for forms with repeated or numbered
/// fields (checkbox groups, the segment builder's rows).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(transparent)]
pub(super) struct Pairs(pub(super) Vec<(String, String)>);

impl Pairs {
    /// The first value of `name`.
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Every value of `name`, in order.
    pub(super) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .collect()
    }
}

impl CsrfForm for Pairs {
    fn csrf(&self) -> &str {
        self.get("csrf").unwrap_or("")
    }
}
