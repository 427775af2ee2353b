//! The audience pages: the contact list with its filters and sorts, one contact (its
//! attributes, events, messages and topic unsubscriptions; unbounce, delete), the segment builder
//! with its count, and the CSV import. Each calls the use case of the API route it stands
//! for.

use std::collections::HashMap;

use actix_multipart::Multipart;
use actix_web::{
    http::{header, ConnectionType, StatusCode},
    web, HttpRequest, HttpResponse,
};
use futures_util::StreamExt;
use mailroom_app::{
    contacts::{
        count_search, delete_contact, get_contact, import_csv, list_attribute_metas,
        list_contact_events, list_contacts, search_contacts, unbounce_contact, SearchRequest,
    },
    messages::list_messages,
    topics::list_topics,
    AppError, Services,
};
use mailroom_domain::{
    attribute::{AttributeMeta, AttributeType, AttributeValue},
    condition::{
        engagement::{Activity, ENGAGEMENT_OPERATORS},
        operators_for, ConditionInput, MAX_CONDITIONS,
    },
    contact::{Contact, ContactQuery, ContactSort, StatusFilter},
    message::{MessageFilter, MessageOrder},
    paging::PageRequest,
    AccountId, ContactId, FieldError, TopicId,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::{
    blocking, check_csrf, check_same_origin, error_page,
    page_kit::{
        account_page, account_session, confirmation_page, done_page, is_confirmed, member, page_at,
        query_tail, record_form, record_ids, respond, Confirmation, Pager, Pairs,
    },
    pages::{day_and_minute, message, require_session, see_other, CsrfForm},
    render,
};
use crate::routes::contacts_import::{
    next_within, ChannelReader, ImportLimits, CHANNEL_CHUNKS, IMPORT_DEADLINE, MAX_IMPORT_BYTES,
};

/// Condition rows the segment builder shows at first, and at most.
const FIRST_ROWS: usize = 3;
const MAX_ROWS: usize = 20;

/// Attribute slugs offered as suggestions in the builder (the field takes any slug).
const SUGGESTED_SLUGS: u32 = 100;

/// Topics offered in the builder's and the contact page's lists.
const LISTED_TOPICS: u32 = 100;

/// The longest CSRF field of the import form read (a token is 43 characters).
const MAX_CSRF_FIELD: usize = 256;

#[derive(Debug, Serialize)]
struct ContactRow {
    id: String,
    email: String,
    status: &'static str,
    created_at: String,
    message_count: u32,
}

fn status_of(contact: &Contact) -> &'static str {
    if contact.hard_bounced_at.is_some() {
        "bounced"
    } else if contact.complaint_at.is_some() {
        "complained"
    } else if contact.unsubscribed_at.is_some() {
        "unsubscribed"
    } else {
        "active"
    }
}

impl From<&Contact> for ContactRow {
    fn from(contact: &Contact) -> Self {
        Self {
            id: contact.id.to_string(),
            email: contact.email.clone(),
            status: status_of(contact),
            created_at: day_and_minute(contact.created_at),
            message_count: contact.message_count,
        }
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    search: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    sort: Option<String>,
    #[serde(default)]
    order: Option<String>,
    #[serde(default, skip_serializing)]
    start: Option<u64>,
}

/// Reads the list's filters as the API reads its query; a bad value is listed, not a 500.
fn contact_query(params: &ListQuery) -> (ContactQuery, Vec<String>) {
    let mut query = ContactQuery::default();
    let mut errors = Vec::new();
    if let Some(sort) = params.sort.as_deref().filter(|s| !s.is_empty()) {
        match ContactSort::parse(sort) {
            Some(sort) => query.sort = sort,
            None => errors.push("Sort: not a sort key.".to_owned()),
        }
    }
    query.ascending = params.order.as_deref() != Some("desc");
    if let Some(status) = params.status.as_deref().filter(|s| !s.is_empty()) {
        match StatusFilter::parse(status) {
            Some(status) => query.status = Some(status),
            None => errors.push("Status: must be bounced or unsubscribed.".to_owned()),
        }
    }
    query.search = params
        .search
        .as_deref()
        .map(|search| search.replace('\0', ""))
        .filter(|search| !search.is_empty());
    (query, errors)
}

/// `GET /console/accounts/{id}/contacts`: one page of the list, filtered and sorted.
pub(super) async fn list(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<ListQuery>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let params = query.into_inner();
    respond(
        blocking(move || {
            let member = member(&services, &signed_in, account, "GET", "/contacts")?;
            let (query, errors) = contact_query(&params);
            let page = page_at(params.start);
            let contacts: Vec<ContactRow> = if errors.is_empty() {
                list_contacts(&services, &member, &query, page)?
                    .iter()
                    .map(ContactRow::from)
                    .collect()
            } else {
                Vec::new()
            };
            let tail = query_tail(&[
                ("search", params.search.as_deref()),
                ("status", params.status.as_deref()),
                ("sort", params.sort.as_deref()),
                ("order", params.order.as_deref()),
            ]);
            let pager = Pager::new(page, contacts.len(), &tail);
            account_page(
                &services,
                &signed_in,
                account,
                if errors.is_empty() {
                    StatusCode::OK
                } else {
                    StatusCode::BAD_REQUEST
                },
                "contacts.html",
                ("Contacts", "contacts"),
                minijinja::context! {
                    contacts => contacts, filters => params, errors => errors, pager => pager,
                },
            )
        })
        .await,
    )
}

#[derive(Debug, Serialize)]
struct AttributeRow {
    slug: String,
    value: String,
}

#[derive(Debug, Serialize)]
struct EventRow {
    slug: String,
    occurred_at: String,
}

#[derive(Debug, Serialize)]
struct MessageRow {
    id: String,
    status: &'static str,
    created_at: String,
    attempts: u32,
    last_reply: Option<String>,
}

fn attribute_text(value: &AttributeValue) -> String {
    if let AttributeValue::Number(number) = value {
        // As entered: 21, not the 21.0 of its JSON.
        return number.to_string();
    }
    match value.to_json() {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct NoticeQuery {
    #[serde(default)]
    done: Option<String>,
}

/// `GET /console/accounts/{id}/contacts/{contactId}`.
pub(super) async fn show(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    query: web::Query<NoticeQuery>,
) -> HttpResponse {
    let (services, signed_in) = match require_session(&req).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (account, contact) = match record_ids(&path.0, &path.1, ContactId::parse) {
        Ok(ids) => ids,
        Err(response) => return response,
    };
    let notice = match query.done.as_deref() {
        Some("unbounced") => Some("The contact was unbounced: messages go to it again."),
        _ => None,
    };
    respond(
        blocking(move || {
            let member = member(
                &services,
                &signed_in,
                account,
                "GET",
                &format!("/contacts/{contact}"),
            )?;
            let (found, attributes) = get_contact(&services, &member, contact)?;
            let attributes: Vec<AttributeRow> = attributes
                .iter()
                .map(|(slug, value)| AttributeRow {
                    slug: slug.clone(),
                    value: attribute_text(value),
                })
                .collect();
            let messages: Vec<MessageRow> = list_messages(
                &services,
                &member,
                &MessageFilter {
                    contact_id: Some(contact),
                    ..MessageFilter::default()
                },
                MessageOrder::NewestFirst,
                PageRequest {
                    start: 0,
                    limit: super::page_kit::PAGE_ROWS,
                },
            )?
            .into_iter()
            .map(|message| MessageRow {
                id: message.id.to_string(),
                status: message.status.as_str(),
                created_at: day_and_minute(message.created_at),
                attempts: message.attempts,
                last_reply: message.last_reply,
            })
            .collect();
            let events: Vec<EventRow> = list_contact_events(
                &services,
                &member,
                contact,
                PageRequest {
                    start: 0,
                    limit: super::page_kit::PAGE_ROWS,
                },
            )?
            .into_iter()
            .map(|event| EventRow {
                slug: event.slug.as_str().to_owned(),
                occurred_at: day_and_minute(event.occurred_at),
            })
            .collect();
            let topic_names: HashMap<TopicId, String> = if found.topic_unsubscriptions.is_empty() {
                HashMap::new()
            } else {
                list_topics(
                    &services,
                    &member,
                    PageRequest {
                        start: 0,
                        limit: LISTED_TOPICS,
                    },
                )?
                .into_iter()
                .map(|topic| (topic.id, topic.name))
                .collect()
            };
            let unsubscriptions: Vec<String> = found
                .topic_unsubscriptions
                .iter()
                .map(|id| {
                    topic_names
                        .get(id)
                        .cloned()
                        .unwrap_or_else(|| id.to_string())
                })
                .collect();
            account_page(
                &services,
                &signed_in,
                account,
                StatusCode::OK,
                "contact.html",
                ("Contact", "contacts"),
                minijinja::context! {
                    contact => ContactRow::from(&found),
                    messages_query => serde_urlencoded::to_string([("email", found.email.as_str())])
                        .unwrap_or_default(),
                    hard_bounced_at => found.hard_bounced_at.map(day_and_minute),
                    complaint_at => found.complaint_at.map(day_and_minute),
                    unsubscribed_at => found.unsubscribed_at.map(day_and_minute),
                    unsubscriptions => unsubscriptions,
                    attributes => attributes,
                    messages => messages,
                    events => events,
                    notice => notice,
                },
            )
        })
        .await,
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct CsrfOnly {
    #[serde(default)]
    csrf: String,
}

impl CsrfForm for CsrfOnly {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// `POST /console/accounts/{id}/contacts/{contactId}/unbounce`.
pub(super) async fn unbounce(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, _, (account, contact)) = match record_form::<CsrfOnly, _, _>(
        &req,
        &body,
        &path.0,
        &path.1,
        ContactId::parse,
    )
    .await
    {
        Ok(found) => found,
        Err(response) => return response,
    };
    let done = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "PATCH",
            &format!("/contacts/{contact}"),
        )?;
        unbounce_contact(&services, &member, contact)
    })
    .await;
    match done {
        Ok(_) => see_other(&format!(
            "/console/accounts/{account}/contacts/{contact}?done=unbounced"
        )),
        Err(error) => error_page(&error),
    }
}

/// `POST /console/accounts/{id}/contacts/{contactId}/delete`: first the confirmation that
/// names the contact, then (with `confirmed=yes`) the deletion.
pub(super) async fn delete(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (services, signed_in, form, (account, contact)) =
        match record_form::<Pairs, _, _>(&req, &body, &path.0, &path.1, ContactId::parse).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    let confirmed = is_confirmed(&form);
    respond(
        blocking(move || {
            let member = member(
                &services,
                &signed_in,
                account,
                "DELETE",
                &format!("/contacts/{contact}"),
            )?;
            if !confirmed {
                let (found, _) = get_contact(&services, &member, contact)?;
                return confirmation_page(
                    &services,
                    &signed_in,
                    account,
                    "contacts",
                    &Confirmation {
                        title: "Delete this contact?".into(),
                        what: found.email,
                        consequence: "Its attributes, events and topic choices go with it. \
                                      Its messages stay in the log, and its address stays \
                                      on the suppression list for any bounce, complaint or \
                                      unsubscription it had."
                            .into(),
                        button: "Delete the contact".into(),
                        cancel: format!("/console/accounts/{account}/contacts/{contact}"),
                    },
                );
            }
            let deleted = delete_contact(&services, &member, contact)?;
            done_page(
                &services,
                &signed_in,
                account,
                "contacts",
                (
                    "Contact deleted",
                    &format!(
                        "{} was deleted with its attributes, events and unsubscriptions.",
                        deleted.email
                    ),
                ),
                (
                    &format!("/console/accounts/{account}/contacts"),
                    "Back to the contacts",
                ),
            )
        })
        .await,
    )
}

/// One audience condition of a console form (the segment builder, an announcement), as
/// the form holds it (`templates/condition.html` shows it), trimmed.
#[derive(Debug, Default, Clone, Serialize)]
pub(super) struct ConditionRow {
    index: usize,
    slug: String,
    operator: String,
    value: String,
    /// The condition in words ([`condition_words`]), empty for a row without an attribute.
    words: String,
}

impl ConditionRow {
    /// Row `index` of the form's `c{index}_slug`, `_operator` and `_value` fields.
    pub(super) fn new(index: usize, slug: &str, operator: &str, value: &str) -> Self {
        let mut row = Self {
            index,
            slug: slug.trim().to_owned(),
            operator: operator.trim().to_owned(),
            value: value.trim().to_owned(),
            words: String::new(),
        };
        row.words = row
            .input()
            .as_ref()
            .map(condition_words)
            .unwrap_or_default();
        row
    }

    /// The condition the API would receive; `None` for a row without an attribute (left
    /// out). A value is a JSON number for the number operators when it reads as one,
    /// otherwise text (the use case says what does not fit).
    pub(super) fn input(&self) -> Option<ConditionInput> {
        (!self.slug.is_empty()).then(|| ConditionInput {
            slug: self.slug.clone(),
            operator: self.operator.clone(),
            value: condition_value(&self.operator, &self.value),
        })
    }
}

/// The segment builder's form: numbered rows (`c0_slug`, `c0_operator`, `c0_value`, …),
/// the unsubscribed switches, and what was asked (`count`, `show`, more `rows`).
#[derive(Debug, Serialize)]
pub(super) struct SegmentForm {
    rows: Vec<ConditionRow>,
    include_unsubscribed: bool,
    topic: String,
}

impl SegmentForm {
    pub(super) fn read(pairs: &Pairs) -> Self {
        let wanted = pairs
            .get("rows")
            .and_then(|rows| rows.parse::<usize>().ok())
            .unwrap_or(FIRST_ROWS)
            .clamp(1, MAX_ROWS.min(MAX_CONDITIONS));
        let rows = (0..wanted)
            .map(|index| {
                let field = |name: &str| pairs.get(&format!("c{index}_{name}")).unwrap_or("");
                ConditionRow::new(index, field("slug"), field("operator"), field("value"))
            })
            .collect();
        Self {
            rows,
            include_unsubscribed: pairs.get("include_unsubscribed").is_some(),
            topic: pairs.get("topic").unwrap_or("").to_owned(),
        }
    }

    /// The search request the API would receive ([`ConditionRow::input`] per row).
    pub(super) fn request(&self) -> Result<SearchRequest, Vec<FieldError>> {
        let topic = if self.topic.is_empty() {
            None
        } else {
            Some(TopicId::parse(&self.topic).map_err(|_| {
                vec![FieldError {
                    field: "topic".to_owned(),
                    message: "must be one of the listed topics".to_owned(),
                }]
            })?)
        };
        let attributes = self.rows.iter().filter_map(ConditionRow::input).collect();
        Ok(SearchRequest {
            attributes,
            include_unsubscribed: self.include_unsubscribed,
            topic,
            after: None,
        })
    }
}

fn condition_value(operator: &str, value: &str) -> Option<serde_json::Value> {
    let numeric = matches!(
        operator,
        "n_equal"
            | "n_not_equal"
            | "greater_than"
            | "greater_than_equal"
            | "less_than"
            | "less_than_equal"
    );
    if value.is_empty() {
        return None;
    }
    // An engagement window is a whole number of days, or, on one announcement or
    // template, its JSON object `{"days": 7, "announcementId": "…"}`, as the API takes it.
    if ENGAGEMENT_OPERATORS.contains(&operator) {
        if let Ok(days) = value.parse::<u64>() {
            return Some(serde_json::Value::from(days));
        }
        if value.starts_with('{') {
            if let Ok(object) = serde_json::from_str::<serde_json::Value>(value) {
                return Some(object);
            }
        }
    }
    if numeric {
        // An integer stays one, so it reads back as typed (21, not 21.0).
        if let Ok(number) = value.parse::<i64>() {
            return Some(serde_json::Value::Number(number.into()));
        }
        if let Ok(number) = value.parse::<f64>() {
            if let Some(number) = serde_json::Number::from_f64(number) {
                return Some(serde_json::Value::Number(number));
            }
        }
    }
    Some(serde_json::Value::String(value.to_owned()))
}

/// One operator a condition row offers: its wire name, sent with the form, and the words
/// the person reads.
#[derive(Debug, Serialize)]
pub(super) struct OperatorChoice {
    value: &'static str,
    label: &'static str,
}

/// The words for each operator, in the order rows offer them: the attribute operators,
/// then the engagement ones (`engagement.*` slugs).
const OPERATOR_LABELS: [(&str, &str); 20] = [
    ("exists", "has a value"),
    ("not_exists", "has no value"),
    ("true", "is true"),
    ("false", "is false"),
    ("n_equal", "equals (number)"),
    ("n_not_equal", "does not equal (number)"),
    ("greater_than", "is greater than"),
    ("greater_than_equal", "is at least"),
    ("less_than", "is less than"),
    ("less_than_equal", "is at most"),
    ("after", "is after (date)"),
    ("before", "is before (date)"),
    ("d_equal", "is on (date)"),
    ("d_not_equal", "is not on (date)"),
    ("s_equal", "is (text)"),
    ("s_not_equal", "is not (text)"),
    ("contains", "contains"),
    ("not_contains", "does not contain"),
    ("within_days", "happened in the last … days"),
    ("not_within_days", "did not happen in the last … days"),
];

/// The operators condition rows offer: in groups by the attribute type they apply to,
/// and the type of each attribute the account has (`kinds`, by slug), so a row whose
/// attribute is known offers only its type's operators (and the two for any type).
#[derive(Debug, Serialize)]
pub(super) struct OperatorOffer {
    groups: Vec<OperatorGroup>,
    kinds: HashMap<String, &'static str>,
}

/// The operators of one attribute type.
#[derive(Debug, Serialize)]
struct OperatorGroup {
    /// What the group is called in the list ("Text", "Any type").
    name: &'static str,
    /// The type it is for (`string`, …), `any`, or `engagement` for the `engagement.*`
    /// slugs.
    kind: &'static str,
    operators: Vec<OperatorChoice>,
}

/// The words of operator `name`.
fn operator_label(name: &str) -> &'static str {
    OPERATOR_LABELS
        .iter()
        .find(|(operator, _)| *operator == name)
        .map_or("", |(_, label)| *label)
}

fn operator_group(
    name: &'static str,
    kind: &'static str,
    operators: &[&'static str],
) -> OperatorGroup {
    OperatorGroup {
        name,
        kind,
        operators: operators
            .iter()
            .map(|value| OperatorChoice {
                value,
                label: operator_label(value),
            })
            .collect(),
    }
}

/// The operator groups (the unit test below keeps them in step with the domain's
/// operators).
fn operator_groups() -> Vec<OperatorGroup> {
    const ANY: [&str; 2] = ["exists", "not_exists"];
    let of_type = |attribute_type: AttributeType| -> Vec<&'static str> {
        operators_for(attribute_type)
            .into_iter()
            .filter(|name| !ANY.contains(name))
            .collect()
    };
    vec![
        operator_group("Any type", "any", &ANY),
        operator_group("Yes or no", "boolean", &of_type(AttributeType::Boolean)),
        operator_group("Number", "number", &of_type(AttributeType::Number)),
        operator_group("Date", "date", &of_type(AttributeType::Date)),
        operator_group("Text", "string", &of_type(AttributeType::String)),
        operator_group(
            "What happened to its mail",
            "engagement",
            &ENGAGEMENT_OPERATORS,
        ),
    ]
}

/// What condition rows offer for the account's attributes in `metas`.
pub(super) fn operator_offer(metas: &[AttributeMeta]) -> OperatorOffer {
    let kinds = metas
        .iter()
        .map(|meta| (meta.slug.clone(), meta.attribute_type.as_str()))
        .chain(
            Activity::ALL
                .iter()
                .map(|activity| (activity.slug().to_owned(), "engagement")),
        )
        .collect();
    OperatorOffer {
        groups: operator_groups(),
        kinds,
    }
}

/// The account's attributes the builder suggests and types (the first ones; a row whose
/// attribute is past them is offered every operator).
pub(super) fn suggested_attributes(
    services: &Services,
    member: &mailroom_app::auth::Member,
) -> Result<Vec<AttributeMeta>, AppError> {
    list_attribute_metas(
        services,
        member,
        PageRequest {
            start: 0,
            limit: SUGGESTED_SLUGS,
        },
    )
}

/// A condition as a person reads it: "plan is “pro”", "engagement.opened happened in
/// the last 30 days".
pub(super) fn condition_words(condition: &ConditionInput) -> String {
    let label = OPERATOR_LABELS
        .iter()
        .find(|(operator, _)| *operator == condition.operator)
        .map_or(condition.operator.as_str(), |(_, label)| *label);
    // The type in brackets helps choose in the list; the condition reads without it.
    let label = [" (text)", " (date)", " (number)"]
        .iter()
        .fold(label, |label, kind| label.trim_end_matches(kind));
    let (value, of_what) = match &condition.value {
        None => (String::new(), ""),
        Some(serde_json::Value::String(text)) => (text.clone(), ""),
        Some(serde_json::Value::Object(window)) => {
            let days = window
                .get("days")
                .map(ToString::to_string)
                .unwrap_or_default();
            let of_what = if window.contains_key("announcementId") {
                ", for one announcement's mail"
            } else if window.contains_key("templateId") {
                ", for one template's mail"
            } else {
                ""
            };
            (days, of_what)
        }
        Some(other) => (other.to_string(), ""),
    };
    if label.contains('…') {
        format!("{} {}{of_what}", condition.slug, label.replace('…', &value))
    } else if value.is_empty() {
        format!("{} {label}", condition.slug)
    } else {
        format!("{} {label} “{value}”", condition.slug)
    }
}

/// The builder's field errors in words: `attributes[i]` becomes the row the user sees.
pub(super) fn readable(errors: Vec<FieldError>, form: &SegmentForm) -> Vec<String> {
    // Rows without a slug were left out of the request, so map request indexes to rows.
    let shown: Vec<usize> = form
        .rows
        .iter()
        .filter(|row| !row.slug.is_empty())
        .map(|row| row.index + 1)
        .collect();
    errors
        .into_iter()
        .map(|error| {
            let field = error
                .field
                .strip_prefix("attributes[")
                .and_then(|rest| rest.split_once(']'))
                .and_then(|(index, rest)| {
                    let row = shown.get(index.parse::<usize>().ok()?)?;
                    Some(format!("Condition {row}, {}", rest.trim_start_matches('.')))
                })
                .unwrap_or(error.field);
            format!("{field}: {}", error.message)
        })
        .collect()
}

/// What a count came to: the number, or why there is none.
#[derive(Debug, Serialize)]
struct CountOutcome {
    count: Option<u64>,
    errors: Vec<String>,
}

/// Counts the segment as `POST …/contacts/search/count` does; bad conditions are listed.
fn count_segment(
    services: &Services,
    member: &mailroom_app::auth::Member,
    form: &SegmentForm,
) -> Result<CountOutcome, AppError> {
    let request = match form.request() {
        Ok(request) => request,
        Err(errors) => {
            return Ok(CountOutcome {
                count: None,
                errors: errors
                    .into_iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect(),
            })
        }
    };
    match count_search(services, member, &request) {
        Ok(count) => Ok(CountOutcome {
            count: Some(count),
            errors: Vec::new(),
        }),
        Err(AppError::Invalid(errors)) => Ok(CountOutcome {
            count: None,
            errors: readable(errors.0, form),
        }),
        Err(other) => Err(other),
    }
}

#[derive(Debug, Serialize)]
struct TopicChoice {
    id: String,
    name: String,
}

/// `GET /console/accounts/{id}/contacts/segment`: the builder. `count` counts the
/// segment, `show` lists its first contacts (keyset paging from `after`), `rows` adds
/// condition rows, `save` offers to save the conditions as a segment; the page works as a
/// plain form, htmx only refreshes the count live.
pub(super) async fn segment(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<Pairs>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let pairs = query.into_inner();
    respond(
        blocking(move || {
            let member = member(&services, &signed_in, account, "POST", "/contacts/search")?;
            let save = pairs.get("save").map(|_| SaveCard {
                name: pairs.get("name").unwrap_or("").trim().to_owned(),
                errors: Vec::new(),
            });
            builder_page(&services, &signed_in, account, &member, &pairs, save)
        })
        .await,
    )
}

/// The "Save as segment" card under the builder: the name given and why a save failed.
#[derive(Debug, Serialize)]
pub(super) struct SaveCard {
    pub(super) name: String,
    pub(super) errors: Vec<String>,
}

/// The builder's page for the form in `pairs`, with the save card when `save` is given.
pub(super) fn builder_page(
    services: &Services,
    signed_in: &mailroom_app::console::SignedIn,
    account: AccountId,
    member: &mailroom_app::auth::Member,
    pairs: &Pairs,
    save: Option<SaveCard>,
) -> Result<render::Page, AppError> {
    let form = SegmentForm::read(pairs);
    let outcome = if pairs.get("count").is_some() {
        Some(count_segment(services, member, &form)?)
    } else {
        None
    };
    let mut shown: Option<Vec<ContactRow>> = None;
    let mut next_after: Option<String> = None;
    let mut show_errors: Vec<String> = Vec::new();
    if pairs.get("show").is_some() {
        match form.request() {
            Ok(mut request) => {
                request.after = pairs
                    .get("after")
                    .and_then(|after| ContactId::parse(after).ok());
                let page = PageRequest {
                    start: 0,
                    limit: super::page_kit::PAGE_ROWS,
                };
                match search_contacts(services, member, &request, page) {
                    Ok(found) => {
                        if found.len() >= page.limit as usize {
                            next_after = found.last().map(|(contact, _)| contact.id.to_string());
                        }
                        shown = Some(
                            found
                                .iter()
                                .map(|(contact, _)| ContactRow::from(contact))
                                .collect(),
                        );
                    }
                    Err(AppError::Invalid(errors)) => {
                        show_errors = readable(errors.0, &form);
                    }
                    Err(other) => return Err(other),
                }
            }
            Err(errors) => {
                show_errors = errors
                    .into_iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect();
            }
        }
    }
    let metas = suggested_attributes(services, member)?;
    let slugs: Vec<String> = metas
        .iter()
        .map(|meta| meta.slug.clone())
        .chain(
            Activity::ALL
                .iter()
                .map(|activity| activity.slug().to_owned()),
        )
        .collect();
    let topics: Vec<TopicChoice> = list_topics(
        services,
        member,
        PageRequest {
            start: 0,
            limit: LISTED_TOPICS,
        },
    )?
    .into_iter()
    .map(|topic| TopicChoice {
        id: topic.id.to_string(),
        name: topic.name,
    })
    .collect();
    // The query string of this segment without paging, for the next page's link.
    let mut base: Vec<(String, String)> = pairs
        .0
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "after" | "count" | "show" | "save" | "name"))
        .cloned()
        .collect();
    base.push(("show".to_owned(), "1".to_owned()));
    let next_link = next_after.map(|after| {
        base.push(("after".to_owned(), after));
        format!(
            "?{}",
            serde_urlencoded::to_string(&base).unwrap_or_default()
        )
    });
    let errors = !show_errors.is_empty()
        || outcome.as_ref().is_some_and(|o| !o.errors.is_empty())
        || save.as_ref().is_some_and(|card| !card.errors.is_empty());
    account_page(
        services,
        signed_in,
        account,
        if errors {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        },
        "segment.html",
        ("Segment builder", "segment"),
        minijinja::context! {
            form => form,
            more_rows => (form.rows.len() < MAX_ROWS).then(|| form.rows.len() + 1),
            operators => operator_offer(&metas),
            slugs => slugs,
            topics => topics,
            outcome => outcome,
            shown => shown,
            show_errors => show_errors,
            next_link => next_link,
            save => save,
        },
    )
}

/// `GET /console/accounts/{id}/contacts/segment/count`: the count alone, as a fragment
/// htmx puts in place while the builder is edited.
pub(super) async fn segment_count(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<Pairs>,
) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let pairs = query.into_inner();
    let outcome = blocking(move || {
        let member = member(
            &services,
            &signed_in,
            account,
            "POST",
            "/contacts/search/count",
        )?;
        count_segment(&services, &member, &SegmentForm::read(&pairs))
    })
    .await;
    match outcome {
        Ok(outcome) => render::fragment(
            StatusCode::OK,
            "segment_count.html",
            minijinja::context! { outcome => outcome },
        )
        .into(),
        Err(error) => error_page(&error),
    }
}

/// `GET /console/accounts/{id}/contacts/import`: the upload form.
pub(super) async fn import_form(req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    respond(
        blocking(move || {
            member(&services, &signed_in, account, "POST", "/contacts/import")?;
            import_page(&services, &signed_in, account, StatusCode::OK, None)
        })
        .await,
    )
}

#[derive(Debug, Serialize)]
struct ImportReport {
    created: u64,
    updated: u64,
    rejected: u64,
    errors: Vec<(u64, String)>,
    failure: Option<String>,
}

fn import_page(
    services: &Services,
    signed_in: &mailroom_app::console::SignedIn,
    account: AccountId,
    status: StatusCode,
    report: Option<ImportReport>,
) -> Result<render::Page, AppError> {
    account_page(
        services,
        signed_in,
        account,
        status,
        "import.html",
        ("Import contacts", "import"),
        minijinja::context! {
            report => report,
            max_mib => MAX_IMPORT_BYTES / (1024 * 1024),
        },
    )
}

fn bad_upload(text: &str) -> HttpResponse {
    message(StatusCode::BAD_REQUEST, "Bad request", text, None)
}

/// `POST /console/accounts/{id}/contacts/import`: a `multipart/form-data` form whose
/// `csrf` field comes before its `file` field. The file part is streamed through the
/// API's import pipeline (`contacts::import_csv`) with its bounds and back-pressure, so
/// the browser's upload progress follows the rows being stored.
pub(super) async fn import(
    req: HttpRequest,
    path: web::Path<String>,
    mut form: Multipart,
) -> HttpResponse {
    if let Err(response) = check_same_origin(&req) {
        return response;
    }
    let (services, signed_in, account) = match account_session(&req, &path).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    // The CSRF field first: nothing of the file is read before the form is proven ours.
    let mut csrf = Vec::new();
    match form.next().await {
        Some(Ok(mut field)) if field.name() == Some("csrf") => {
            while let Some(chunk) = field.next().await {
                match chunk {
                    Ok(bytes) if csrf.len() + bytes.len() <= MAX_CSRF_FIELD => {
                        csrf.extend_from_slice(&bytes);
                    }
                    _ => return bad_upload("The form could not be read."),
                }
            }
        }
        _ => return bad_upload("The form could not be read."),
    }
    if let Err(response) = check_csrf(&signed_in, &String::from_utf8_lossy(&csrf)) {
        return response;
    }
    // Membership before the file: a non-member's upload is not read.
    let (check_services, check_signed_in) = (services.clone(), signed_in.clone());
    let member = match blocking(move || {
        member(
            &check_services,
            &check_signed_in,
            account,
            "POST",
            "/contacts/import",
        )
    })
    .await
    {
        Ok(member) => member,
        Err(error) => return error_page(&error),
    };
    let limits = req.app_data::<web::Data<ImportLimits>>().map_or(
        ImportLimits {
            idle: crate::DEFAULT_IMPORT_IDLE_TIMEOUT,
            overall: IMPORT_DEADLINE,
        },
        |limits| *limits.get_ref(),
    );
    let started = tokio::time::Instant::now();
    let mut file = match next_within(&mut form, limits, started).await {
        Ok(Some(Ok(field))) if field.name() == Some("file") => field,
        Err(stalled) => return bad_upload(&stalled.text()),
        _ => return bad_upload("Choose a CSV file to import."),
    };
    let Some(_slot) = services.imports.enter(member.account()) else {
        return error_page(&AppError::TooManyAtOnce(format!(
            "This account already runs {} imports; try again once one has finished.",
            services.imports.limit()
        )));
    };
    // No parser thread for an upload that sends nothing.
    let mut first = match next_within(&mut file, limits, started).await {
        Ok(first) => first,
        Err(stalled) => return bad_upload(&stalled.text()),
    };
    let (sender, receiver) = mpsc::channel(CHANNEL_CHUNKS);
    let work = services.clone();
    let imported = blocking(move || import_csv(&work, &member, ChannelReader::new(receiver)));
    let pump = async move {
        let mut received: u64 = 0;
        let mut failure = None;
        while let Some(chunk) = first.take() {
            let item = match chunk {
                Ok(bytes) => {
                    received += bytes.len() as u64;
                    if received > MAX_IMPORT_BYTES {
                        failure = Some(format!(
                            "The file is larger than {} MiB; split it.",
                            MAX_IMPORT_BYTES / (1024 * 1024)
                        ));
                        Err(std::io::Error::other("the import is too large"))
                    } else {
                        Ok(bytes)
                    }
                }
                Err(error) => {
                    failure = Some(format!("The upload could not be read: {error}"));
                    Err(std::io::Error::other(error.to_string()))
                }
            };
            // Once the parser has stopped, the rest is read and dropped.
            if !sender.is_closed() {
                let _ = sender.send(item).await;
            }
            if failure.is_some() {
                break;
            }
            match next_within(&mut file, limits, started).await {
                Ok(next) => first = next,
                Err(stalled) => {
                    let _ = sender
                        .send(Err(std::io::Error::other(stalled.text())))
                        .await;
                    failure = Some(stalled.text());
                    break;
                }
            }
        }
        drop(sender);
        // The multipart stream yields nothing while a part of it is alive.
        drop(file);
        // Whatever follows the file (nothing, from this console's form) is drained so
        // the browser reads the answer, but only for a while: a client that keeps
        // sending gets the answer on a connection that is then closed.
        let drained = tokio::time::timeout(DRAIN_FOR, async {
            let mut left = DRAIN_BYTES;
            while let Some(Ok(mut rest)) = form.next().await {
                while let Some(Ok(bytes)) = rest.next().await {
                    left = left.checked_sub(bytes.len())?;
                }
            }
            Some(())
        })
        .await;
        (failure, !matches!(drained, Ok(Some(()))))
    };
    let (imported, (failure, close)) = tokio::join!(imported, pump);
    let report = match (imported, failure) {
        (_, Some(failure)) => ImportReport {
            created: 0,
            updated: 0,
            rejected: 0,
            errors: Vec::new(),
            failure: Some(failure),
        },
        (Ok(summary), None) => ImportReport {
            created: summary.created,
            updated: summary.updated,
            rejected: summary.rejected,
            errors: summary
                .errors
                .into_iter()
                .map(|row| (row.line, row.reason))
                .collect(),
            failure: None,
        },
        (Err(AppError::Invalid(errors)), None) => ImportReport {
            created: 0,
            updated: 0,
            rejected: 0,
            errors: Vec::new(),
            failure: Some(errors.to_string()),
        },
        (Err(AppError::BadRequest(reason)), None) => ImportReport {
            created: 0,
            updated: 0,
            rejected: 0,
            errors: Vec::new(),
            failure: Some(reason),
        },
        (Err(error), None) => return error_page(&error),
    };
    let status = if report.failure.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let page =
        blocking(move || import_page(&services, &signed_in, account, status, Some(report))).await;
    let mut response = respond(page);
    // The import is done whatever the page: the form must not be sent again by a reload.
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    if close {
        response
            .head_mut()
            .set_connection_type(ConnectionType::Close);
    }
    response
}

/// How long, and how many bytes, an upload's rest is read and dropped after the import
/// stopped reading it (the file was too large, or fields follow it).
const DRAIN_FOR: std::time::Duration = std::time::Duration::from_secs(5);
const DRAIN_BYTES: usize = 1024 * 1024;

#[cfg(test)]
mod tests {
    use mailroom_domain::condition::OPERATORS;

    use super::{
        condition_words, operator_groups, operator_label, ENGAGEMENT_OPERATORS, OPERATOR_LABELS,
    };
    use mailroom_domain::condition::ConditionInput;

    fn words(slug: &str, operator: &str, value: Option<serde_json::Value>) -> String {
        condition_words(&ConditionInput {
            slug: slug.into(),
            operator: operator.into(),
            value,
        })
    }

    #[test]
    fn conditions_read_in_words() {
        assert_eq!(
            words("plan", "s_equal", Some("pro".into())),
            "plan is “pro”"
        );
        assert_eq!(words("vip", "true", None), "vip is true");
        assert_eq!(
            words("engagement.opened", "within_days", Some(30.into())),
            "engagement.opened happened in the last 30 days"
        );
        assert_eq!(
            words(
                "engagement.clicked",
                "not_within_days",
                Some(serde_json::json!({"days": 7, "templateId": "x"}))
            ),
            "engagement.clicked did not happen in the last 7 days, for one template's mail"
        );
    }

    #[test]
    fn every_operator_a_row_offers_has_words() {
        for name in OPERATORS.into_iter().chain(ENGAGEMENT_OPERATORS) {
            assert!(
                OPERATOR_LABELS
                    .iter()
                    .any(|(operator, _)| *operator == name),
                "no words for '{name}'"
            );
        }
        let offered: Vec<&str> = operator_groups()
            .into_iter()
            .flat_map(|group| group.operators.into_iter().map(|choice| choice.value))
            .collect();
        assert_eq!(offered.len(), OPERATOR_LABELS.len(), "{offered:?}");
        for (name, _) in OPERATOR_LABELS {
            assert!(offered.contains(&name), "'{name}' is in no group");
        }
        assert_eq!(operator_label("s_equal"), "is (text)");
    }
}
