//! What the account pages of `settings_pages`, `contact_pages` and `log_pages` share: the
//! membership proof for the API route a page stands for, the layout with the account
//! switcher, fragments for htmx, paging links, and the second step of a destructive form.

use actix_web::{http::StatusCode, HttpRequest, HttpResponse};
use mailroom_app::{
    announcements::list_announcements,
    auth::{verify_membership, Member, RouteCall},
    console::SignedIn,
    segments::list_segments,
    templates::list_templates,
    topics::list_topics,
    AppError, Services,
};
use std::collections::BTreeMap;

use mailroom_domain::{paging::PageRequest, AccountId, FieldError};
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

/// How many records a form's list of choices offers (the first ones, oldest first).
pub(super) const CHOICES: PageRequest = PageRequest {
    start: 0,
    limit: 100,
};

/// A record a form offers to pick: its id, and the name a person knows it by.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Choice {
    pub(super) id: String,
    pub(super) label: String,
}

/// The account's first [`CHOICES`] templates, each labelled "name (slug)".
pub(super) fn template_choices(
    services: &Services,
    member: &Member,
) -> Result<Vec<Choice>, AppError> {
    Ok(list_templates(services, member, CHOICES)?
        .into_iter()
        .map(|template| Choice {
            id: template.id.to_string(),
            label: format!("{} ({})", template.name, template.slug.as_str()),
        })
        .collect())
}

/// The account's first [`CHOICES`] topics, by name.
pub(super) fn topic_choices(services: &Services, member: &Member) -> Result<Vec<Choice>, AppError> {
    Ok(list_topics(services, member, CHOICES)?
        .into_iter()
        .map(|topic| Choice {
            id: topic.id.to_string(),
            label: topic.name,
        })
        .collect())
}

/// The account's first [`CHOICES`] saved segments, by name.
pub(super) fn segment_choices(
    services: &Services,
    member: &Member,
) -> Result<Vec<Choice>, AppError> {
    Ok(list_segments(services, member, CHOICES)?
        .into_iter()
        .map(|segment| Choice {
            id: segment.id.to_string(),
            label: segment.name,
        })
        .collect())
}

/// The account's first [`CHOICES`] announcements, by name.
pub(super) fn announcement_choices(
    services: &Services,
    member: &Member,
) -> Result<Vec<Choice>, AppError> {
    Ok(list_announcements(services, member, CHOICES)?
        .into_iter()
        .map(|announcement| Choice {
            id: announcement.id.to_string(),
            label: announcement.name,
        })
        .collect())
}

/// A field of a console form: the API's name for what it carries, the form's own name for
/// it, and the label a person reads beside it.
#[derive(Debug, Clone, Copy)]
pub(super) struct FormField {
    pub(super) api: &'static str,
    pub(super) name: &'static str,
    pub(super) label: &'static str,
}

/// A form's errors, said in its labels: each on its field (by the form's field name, for
/// `aria-invalid` and the message under the field) and all of them in the summary above
/// the form, so none is hidden behind the first.
#[derive(Debug, Default, Serialize)]
pub(super) struct FormErrors {
    /// "Label: message", one per error, in the order they were found.
    summary: Vec<String>,
    /// The message of each field that has one, by the form's field name.
    on: BTreeMap<&'static str, String>,
}

impl FormErrors {
    /// `errors` (as the use cases name their fields) on the fields of `form`. A field of a
    /// list (`attributes[1].value`) is its list's, and says its row ("Audience conditions,
    /// row 2: …"). An error of a field the form does not have (or of the whole request)
    /// is in the summary only, without the API's name for it.
    pub(super) fn new(errors: &[FieldError], form: &[FormField]) -> Self {
        let mut said = Self::default();
        for error in errors {
            let message = sentence(&error.message);
            let found = form.iter().find_map(|field| {
                let rest = error.field.strip_prefix(field.api)?;
                if rest.is_empty() {
                    return Some((field, None));
                }
                let index: usize = rest.strip_prefix('[')?.split(']').next()?.parse().ok()?;
                Some((field, Some(index + 1)))
            });
            match found {
                Some((field, None)) => {
                    said.summary.push(format!("{}: {message}", field.label));
                    said.on.entry(field.name).or_insert(message);
                }
                Some((field, Some(row))) => {
                    said.summary
                        .push(format!("{}, row {row}: {message}", field.label));
                    said.on
                        .entry(field.name)
                        .or_insert(format!("Row {row}: {message}"));
                }
                None => said.summary.push(message),
            }
        }
        said
    }
}

/// `message` as a sentence: a capital first letter and a closing full stop.
fn sentence(message: &str) -> String {
    let mut chars = message.trim().chars();
    let mut text: String = chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    if !text.ends_with(['.', '!', '?']) {
        text.push('.');
    }
    text
}

/// A record another one names, or `None` once it is deleted.
pub(super) fn unless_gone<T>(found: Result<T, AppError>) -> Result<Option<T>, AppError> {
    match found {
        Ok(record) => Ok(Some(record)),
        Err(AppError::NotFound) => Ok(None),
        Err(other) => Err(other),
    }
}

/// The label of the record `id` among `choices`, if it is one of them.
pub(super) fn choice_label<'c>(choices: &'c [Choice], id: &str) -> Option<&'c str> {
    choices
        .iter()
        .find(|choice| choice.id == id)
        .map(|choice| choice.label.as_str())
}

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

#[cfg(test)]
mod tests {
    use mailroom_domain::FieldError;

    use super::{FormErrors, FormField};

    const FORM: &[FormField] = &[
        FormField {
            api: "templateId",
            name: "template_id",
            label: "Template",
        },
        FormField {
            api: "attributes",
            name: "attributes",
            label: "Audience conditions",
        },
    ];

    #[test]
    fn errors_are_said_in_the_forms_labels_on_their_fields() {
        let said = FormErrors::new(
            &[
                FieldError::new("templateId", "must be the id of a template of this account"),
                FieldError::new("attributes[1].value", "must be a number"),
                FieldError::new("body", "is incomplete"),
            ],
            FORM,
        );
        assert_eq!(
            said.summary,
            [
                "Template: Must be the id of a template of this account.",
                "Audience conditions, row 2: Must be a number.",
                "Is incomplete.",
            ]
        );
        assert_eq!(
            said.on["template_id"],
            "Must be the id of a template of this account."
        );
        assert_eq!(said.on["attributes"], "Row 2: Must be a number.");
        assert!(!said.summary.iter().any(|line| line.contains("templateId")));
    }
}
