//! `/v2/accounts/{accountId}/contacts`, `/events` and `/attributes`.

use actix_web::{delete, get, patch, post, web, HttpRequest};
use mailroom_app::{contacts, AppError, Services};
use mailroom_domain::{
    condition::ConditionInput,
    contact::{ContactQuery, ContactSort, StatusFilter},
    email::EmailAddress,
    patch::Field,
    ContactId, TopicId, ValidationErrors,
};

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::contacts_dto::{
        AttributeMetaDto, ConditionBody, ContactDto, ContactEventDto, ContactListParams,
        DeleteContactParams, EventBody, EventNameDto, SearchBody, UnbounceBody, UpsertContactBody,
    },
    tenancy::Membership,
};

/// Parses the list's query parameters; a bad value is a 400 naming the parameter.
fn contact_query(params: ContactListParams) -> Result<ContactQuery, ApiError> {
    let mut errors = ValidationErrors::new();
    let mut query = ContactQuery::default();
    if let Some(sort) = params.sort_by.as_deref() {
        match ContactSort::parse(sort) {
            Some(sort) => query.sort = sort,
            None => errors.push(
                "sortBy",
                "must be one of createDate, email, messageCount, name, status",
            ),
        }
    }
    match params.order.as_deref() {
        None | Some("1") => {}
        Some("-1") => query.ascending = false,
        Some(_) => errors.push("order", "must be 1 or -1"),
    }
    if let Some(status) = params.status.as_deref() {
        match StatusFilter::parse(status) {
            Some(status) => query.status = Some(status),
            None => errors.push("status", "must be bounced or unsubscribed"),
        }
    }
    if let Some(email) = params.email {
        if errors
            .collect("email", EmailAddress::parse(&email))
            .is_some()
        {
            query.email = Some(email);
        }
    }
    query.search = params.search.filter(|search| !search.is_empty());
    if query
        .search
        .as_deref()
        .is_some_and(|search| search.contains('\0'))
    {
        // PostgreSQL text cannot hold U+0000.
        errors.push("search", "must not contain the NUL character");
    }
    errors.into_result().map_err(AppError::Invalid)?;
    Ok(query)
}

/// One page of contacts, filtered and sorted.
#[utoipa::path(
    tag = "contacts", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
        ContactListParams,
    ),
    responses((status = 200, body = PageEnvelope<ContactDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/contacts")]
pub(crate) async fn list_contacts(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
    params: web::Query<ContactListParams>,
) -> Result<web::Json<PageEnvelope<ContactDto>>, ApiError> {
    let query = contact_query(params.into_inner())?;
    let page = paging.0;
    let list =
        run_blocking(move || contacts::list_contacts(&services, &member.0, &query, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(ContactDto::plain).collect(),
        page,
    )))
}

/// How many contacts the list shows under the same filters.
#[utoipa::path(
    tag = "contacts", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ContactListParams),
    responses((status = 200, body = CountDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/contacts/count")]
pub(crate) async fn count_contacts(
    services: web::Data<Services>,
    member: Membership,
    params: web::Query<ContactListParams>,
) -> Result<web::Json<CountDto>, ApiError> {
    let query = contact_query(params.into_inner())?;
    let count =
        run_blocking(move || contacts::count_contacts(&services, &member.0, &query)).await?;
    Ok(web::Json(CountDto { count }))
}

/// Create a contact, or merge attributes into the one with this email.
#[utoipa::path(
    tag = "contacts", request_body = UpsertContactBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = ContactDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/contacts")]
pub(crate) async fn upsert_contact(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<UpsertContactBody>,
) -> Result<web::Json<ContactDto>, ApiError> {
    let request = contacts::UpsertContactRequest {
        email: body.0.email,
        attributes: body.0.attributes,
    };
    let saved =
        run_blocking(move || contacts::upsert_contact(&services, &member.0, request)).await?;
    Ok(web::Json(ContactDto::with_attributes(
        saved.contact,
        saved.attributes,
    )))
}

/// One contact with its resolved attributes.
#[utoipa::path(
    tag = "contacts", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("contactId" = String, Path, description = "Contact id")),
    responses((status = 200, body = ContactDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/contacts/{contactId}")]
pub(crate) async fn get_contact(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<ContactDto>, ApiError> {
    let contact: ContactId = record_id(&path.1)?;
    let (found, attributes) =
        run_blocking(move || contacts::get_contact(&services, &member.0, contact)).await?;
    Ok(web::Json(ContactDto::with_attributes(found, attributes)))
}

/// Unbounce a contact: the body must be exactly `{"hardBounced": false}`.
#[utoipa::path(
    tag = "contacts", request_body = UnbounceBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("contactId" = String, Path, description = "Contact id")),
    responses((status = 200, body = ContactDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[patch("/accounts/{accountId}/contacts/{contactId}")]
pub(crate) async fn unbounce_contact(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<UnbounceBody>,
) -> Result<web::Json<ContactDto>, ApiError> {
    let contact: ContactId = record_id(&path.1)?;
    if body.0.hard_bounced != Field::Value(false) {
        return Err(ApiError::invalid_field(
            "hardBounced",
            "the only supported update is {\"hardBounced\": false}",
        ));
    }
    let updated =
        run_blocking(move || contacts::unbounce_contact(&services, &member.0, contact)).await?;
    Ok(web::Json(ContactDto::plain(updated)))
}

/// Delete a contact with its events, attributes and unsubscriptions; its address stays
/// on the suppression list for every mark it carried. With `erase=true`, the erasure of
/// a person: the address and what was sent to it are also removed from its messages,
/// their tracked links and the webhook events, and its suppression entries keep only the
/// address's hash.
#[utoipa::path(
    tag = "contacts", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("contactId" = String, Path, description = "Contact id"),
        ("erase" = Option<bool>, Query, description = "`true` erases the person's data beyond the contact too (default `false`)"),
    ),
    responses((status = 200, body = ContactDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/contacts/{contactId}")]
pub(crate) async fn delete_contact(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    params: web::Query<DeleteContactParams>,
) -> Result<web::Json<ContactDto>, ApiError> {
    let contact: ContactId = record_id(&path.1)?;
    let erase = match params.erase.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(AppError::invalid("erase", "must be true or false").into()),
    };
    let deleted = run_blocking(move || {
        if erase {
            contacts::erase_contact(&services, &member.0, contact)
        } else {
            contacts::delete_contact(&services, &member.0, contact)
        }
    })
    .await?;
    Ok(web::Json(ContactDto::plain(deleted)))
}

/// One page of a contact's events, newest first.
#[utoipa::path(
    tag = "events", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("contactId" = String, Path, description = "Contact id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<ContactEventDto>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/contacts/{contactId}/events")]
pub(crate) async fn list_contact_events(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<ContactEventDto>>, ApiError> {
    let contact: ContactId = record_id(&path.1)?;
    let page = paging.0;
    let account = member.0.account();
    let events =
        run_blocking(move || contacts::list_contact_events(&services, &member.0, contact, page))
            .await?;
    Ok(web::Json(PageEnvelope::page(
        events
            .into_iter()
            .map(|event| ContactEventDto::new(account, event))
            .collect(),
        page,
    )))
}

/// Record a contact event (the contact is created when unknown). A 200 means it is durable.
#[utoipa::path(
    tag = "events", request_body = EventBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = ContactEventDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/events")]
pub(crate) async fn record_event(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<EventBody>,
) -> Result<web::Json<ContactEventDto>, ApiError> {
    let request = contacts::RecordEventRequest {
        email: body.0.email,
        slug: body.0.slug,
        attributes: body.0.attributes,
    };
    let account = member.0.account();
    let event = run_blocking(move || contacts::record_event(&services, &member.0, request)).await?;
    Ok(web::Json(ContactEventDto::new(account, event)))
}

/// Every event name with its count and latest time, in one envelope.
#[utoipa::path(
    tag = "events", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = PageEnvelope<EventNameDto>), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/events/names")]
pub(crate) async fn event_names(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<PageEnvelope<EventNameDto>>, ApiError> {
    let names = run_blocking(move || contacts::event_names(&services, &member.0)).await?;
    let items = names
        .into_iter()
        .map(|name| EventNameDto {
            slug: name.slug,
            count: name.count,
            last_seen: name.last_seen,
        })
        .collect();
    Ok(web::Json(PageEnvelope::whole(items)))
}

/// One page of attribute metas: system, then custom and event by slug.
#[utoipa::path(
    tag = "contacts", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<AttributeMetaDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/attributes")]
pub(crate) async fn list_attributes(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<AttributeMetaDto>>, ApiError> {
    let page = paging.0;
    let metas =
        run_blocking(move || contacts::list_attribute_metas(&services, &member.0, page)).await?;
    let items = metas
        .into_iter()
        .map(|meta| AttributeMetaDto {
            slug: meta.slug,
            attribute_type: meta.attribute_type.as_str().to_owned(),
            source: meta.source.as_str().to_owned(),
        })
        .collect();
    Ok(web::Json(PageEnvelope::page(items, page)))
}

/// How many attribute metas the account has.
#[utoipa::path(
    tag = "contacts", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/attributes/count")]
pub(crate) async fn count_attributes(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count = run_blocking(move || contacts::count_attribute_metas(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// The `after` query parameter of keyset paging: a contact id, given at most once.
fn keyset_after(query: &str) -> Result<Option<ContactId>, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|e| ApiError::bad_request(format!("bad query string: {e}")))?;
    let mut values = pairs.iter().filter(|(key, _)| key == "after");
    match (values.next(), values.next()) {
        (_, Some(_)) => Err(ApiError::invalid_field(
            "after",
            "must be given at most once",
        )),
        (None, None) => Ok(None),
        (Some((_, text)), None) => ContactId::parse(text).map(Some).map_err(|_| {
            ApiError::invalid_field("after", "must be the id of a contact (the last of a page)")
        }),
    }
}

/// The search body as the use case takes it; `includeUnsubscribed` is required.
fn search_request(body: SearchBody) -> Result<contacts::SearchRequest, ApiError> {
    let mut errors = ValidationErrors::new();
    let request = read_search(body, &mut errors);
    errors.into_result().map_err(AppError::Invalid)?;
    Ok(request)
}

/// Reads a search body (also a saved segment's definition), recording each problem of
/// its shape in `errors`; the use case checks the rest (`contacts::audience_segment`).
pub(super) fn read_search(
    body: SearchBody,
    errors: &mut ValidationErrors,
) -> contacts::SearchRequest {
    let include_unsubscribed = body.include_unsubscribed.unwrap_or_else(|| {
        errors.push("includeUnsubscribed", "is required");
        false
    });
    let topic = body.topic_id.and_then(|text| topic_id(&text, errors));
    contacts::SearchRequest {
        attributes: condition_inputs(body.attributes.unwrap_or_default()),
        include_unsubscribed,
        topic,
        after: None,
    }
}

/// A `topicId` of an audience; a text that is no id is recorded in `errors` as the
/// search answers an unknown topic.
pub(super) fn topic_id(text: &str, errors: &mut ValidationErrors) -> Option<TopicId> {
    let parsed = TopicId::parse(text).ok();
    if parsed.is_none() {
        errors.push("topicId", "must be the id of a topic of this account");
    }
    parsed
}

/// Conditions as the use cases take them.
pub(super) fn condition_inputs(conditions: Vec<ConditionBody>) -> Vec<ConditionInput> {
    conditions
        .into_iter()
        .map(|condition| ConditionInput {
            slug: condition.slug,
            operator: condition.operator,
            value: condition.value,
        })
        .collect()
}

/// Contacts matching an audience filter, with their resolved attributes, in id order.
/// Deep pages: pass the last id of a page as `after` (keyset paging) instead of a large
/// `start`.
#[utoipa::path(
    tag = "contacts", request_body = SearchBody, security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0); with `after`, counted from there"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
        ("after" = Option<String>, Query, description = "Keyset paging: only contacts whose id is greater than this contact id (the last `_id` of the previous page); a deep page then costs what the first does"),
    ),
    responses((status = 200, body = PageEnvelope<ContactDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/contacts/search")]
pub(crate) async fn search_contacts(
    req: HttpRequest,
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
    body: JsonBody<SearchBody>,
) -> Result<web::Json<PageEnvelope<ContactDto>>, ApiError> {
    let after = keyset_after(req.query_string())?;
    let mut request = search_request(body.0)?;
    request.after = after;
    let page = paging.0;
    let found =
        run_blocking(move || contacts::search_contacts(&services, &member.0, &request, page))
            .await?;
    let items = found
        .into_iter()
        .map(|(contact, attributes)| ContactDto::with_attributes(contact, attributes))
        .collect();
    Ok(web::Json(PageEnvelope::page(items, page)))
}

/// How many contacts match an audience filter.
#[utoipa::path(
    tag = "contacts", request_body = SearchBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/contacts/search/count")]
pub(crate) async fn count_search(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<SearchBody>,
) -> Result<web::Json<CountDto>, ApiError> {
    let request = search_request(body.0)?;
    let count =
        run_blocking(move || contacts::count_search(&services, &member.0, &request)).await?;
    Ok(web::Json(CountDto { count }))
}
