//! `/v2/accounts/{accountId}/messages`: the transactional send, the message log and the
//! daily stats.

use actix_web::{get, post, web, HttpRequest};
use mailroom_app::{messages, tracking, AppError, Services};
use mailroom_domain::{
    email::EmailAddress,
    message::{MessageFilter, MessageOrder, MessageStatus},
    AnnouncementId, ContactId, MessageId, TemplateId, Timestamp, ValidationErrors,
};

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::messages_dto::{
        CancelByKeyBody, DailyStatsDto, MessageDto, MessageListParams, MessageOrderParam,
        SendMessageBody,
    },
    tenancy::Membership,
};

/// The header that makes a send safe to repeat.
const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// The longest key accepted (Stripe's limit; keys are usually UUIDs).
const MAX_KEY_LENGTH: usize = 255;

/// The `Idempotency-Key` header: absent, or 1 to 255 visible ASCII characters.
fn idempotency_key(request: &HttpRequest) -> Result<Option<String>, ApiError> {
    let Some(value) = request.headers().get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|key| {
            !key.is_empty()
                && key.len() <= MAX_KEY_LENGTH
                && key.bytes().all(|b| b.is_ascii_graphic())
        })
        .ok_or_else(|| {
            AppError::BadRequest(format!(
                "{IDEMPOTENCY_KEY} must be 1 to {MAX_KEY_LENGTH} visible ASCII characters"
            ))
        })?;
    Ok(Some(key.to_owned()))
}

fn send_request(
    body: SendMessageBody,
    idempotency_key: Option<String>,
) -> Result<messages::TransactionalSend, ApiError> {
    let mut errors = ValidationErrors::new();
    let slug = match body.slug {
        Some(slug) if !slug.trim().is_empty() => Some(slug),
        _ => {
            errors.push("slug", "is required");
            None
        }
    };
    let email = match body.email.as_deref().map(EmailAddress::parse) {
        Some(Ok(email)) => Some(email),
        Some(Err(error)) => {
            errors.push("email", error.to_string());
            None
        }
        None => {
            errors.push("email", "is required");
            None
        }
    };
    let send_at = body.send_at.as_deref().and_then(|text| {
        let parsed = Timestamp::parse(text).ok();
        if parsed.is_none() {
            errors.push("sendAt", "must be an RFC 3339 timestamp");
        }
        parsed
    });
    errors.into_result().map_err(AppError::Invalid)?;
    match (slug, email) {
        (Some(slug), Some(email)) => Ok(messages::TransactionalSend {
            slug,
            email,
            data: body.data.unwrap_or_default(),
            idempotency_key,
            send_at,
        }),
        _ => Err(AppError::Internal("validation let an empty field through".into()).into()),
    }
}

fn message_filter(params: MessageListParams) -> Result<MessageFilter, ApiError> {
    let mut errors = ValidationErrors::new();
    let mut filter = MessageFilter::default();
    if let Some(status) = params.status.as_deref() {
        match MessageStatus::parse(status) {
            Some(status) => filter.status = Some(status),
            None => errors.push(
                "status",
                "must be one of queued, sending, sent, failed, bounced, skipped",
            ),
        }
    }
    if let Some(contact) = params.contact_id.as_deref() {
        match ContactId::parse(contact) {
            Ok(contact) => filter.contact_id = Some(contact),
            Err(_) => errors.push("contactId", "must be a contact id"),
        }
    }
    if let Some(announcement) = params.announcement_id.as_deref() {
        match AnnouncementId::parse(announcement) {
            Ok(announcement) => filter.announcement_id = Some(announcement),
            Err(_) => errors.push("announcementId", "must be an announcement id"),
        }
    }
    if let Some(template) = params.template_id.as_deref() {
        match TemplateId::parse(template) {
            Ok(template) => filter.template_id = Some(template),
            Err(_) => errors.push("templateId", "must be a template id"),
        }
    }
    if let Some(email) = params.email.as_deref() {
        match EmailAddress::parse(email) {
            Ok(email) => filter.email = Some(email),
            Err(_) => errors.push("email", "must be an email address"),
        }
    }
    errors.into_result().map_err(AppError::Invalid)?;
    Ok(filter)
}

fn message_order(param: MessageOrderParam) -> Result<MessageOrder, ApiError> {
    match param.order.as_deref() {
        None => Ok(MessageOrder::default()),
        Some(order) => MessageOrder::parse(order).ok_or_else(|| {
            let mut errors = ValidationErrors::new();
            errors.push("order", "must be oldest or newest");
            ApiError::from(AppError::Invalid(errors))
        }),
    }
}

/// Queue a transactional email; answers the message (`queued`). With an
/// `Idempotency-Key` header, the same key and body within 24 hours answers the same
/// message and sends nothing more; the same key with another body is a 400. With `sendAt`
/// it waits until then.
#[utoipa::path(
    tag = "messages", request_body = SendMessageBody, security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the send safe to repeat for 24 hours"),
    ),
    responses((status = 200, body = MessageDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/messages")]
pub(crate) async fn send_message(
    services: web::Data<Services>,
    member: Membership,
    request: HttpRequest,
    body: JsonBody<SendMessageBody>,
) -> Result<web::Json<MessageDto>, ApiError> {
    let send = send_request(body.0, idempotency_key(&request)?)?;
    let queued =
        run_blocking(move || messages::send_transactional(&services, &member.0, &send)).await?;
    Ok(web::Json(MessageDto::from(queued)))
}

/// One page of the account's message log, oldest first unless `order=newest`.
#[utoipa::path(
    tag = "messages", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
        MessageListParams,
        MessageOrderParam,
    ),
    responses((status = 200, body = PageEnvelope<MessageDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/messages")]
pub(crate) async fn list_messages(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
    params: web::Query<MessageListParams>,
    order: web::Query<MessageOrderParam>,
) -> Result<web::Json<PageEnvelope<MessageDto>>, ApiError> {
    let filter = message_filter(params.into_inner())?;
    let order = message_order(order.into_inner())?;
    let page = paging.0;
    let list =
        run_blocking(move || messages::list_messages(&services, &member.0, &filter, order, page))
            .await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(MessageDto::from).collect(),
        page,
    )))
}

/// How many messages the log shows under the same filters.
#[utoipa::path(
    tag = "messages", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), MessageListParams),
    responses((status = 200, body = CountDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/messages/count")]
pub(crate) async fn count_messages(
    services: web::Data<Services>,
    member: Membership,
    params: web::Query<MessageListParams>,
) -> Result<web::Json<CountDto>, ApiError> {
    let filter = message_filter(params.into_inner())?;
    let count =
        run_blocking(move || messages::count_messages(&services, &member.0, &filter)).await?;
    Ok(web::Json(CountDto { count }))
}

/// The account's counters for the 30 UTC days ending today, oldest first, zero days
/// included: a bare array.
#[utoipa::path(
    tag = "messages", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = Vec<DailyStatsDto>), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/messages/stats")]
pub(crate) async fn message_stats(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<Vec<DailyStatsDto>>, ApiError> {
    let days = run_blocking(move || messages::message_stats(&services, &member.0)).await?;
    Ok(web::Json(
        days.into_iter().map(DailyStatsDto::from).collect(),
    ))
}

/// One message: status, attempts, last SMTP reply, timestamps.
#[utoipa::path(
    tag = "messages", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("messageId" = String, Path, description = "Message id")),
    responses((status = 200, body = MessageDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/messages/{messageId}")]
pub(crate) async fn get_message(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<MessageDto>, ApiError> {
    let id: MessageId = record_id(&path.1)?;
    let (found, engagement) = run_blocking(move || {
        let found = messages::get_message(&services, &member.0, id)?;
        let engagement = tracking::message_engagement(&services, &member.0, id)?;
        Ok((found, engagement))
    })
    .await?;
    let mut dto = MessageDto::from(found);
    dto.opened_at = engagement.opened_at;
    dto.clicked_at = engagement.clicked_at;
    Ok(web::Json(dto))
}

/// Runs the cancel of `target` and answers the message.
async fn cancel(
    services: web::Data<Services>,
    member: Membership,
    target: messages::MessageToCancel,
) -> Result<web::Json<MessageDto>, ApiError> {
    let cancelled =
        run_blocking(move || messages::cancel_message(&services, &member.0, &target)).await?;
    Ok(web::Json(MessageDto::from(cancelled)))
}

/// Cancel a message that waits for a worker (a scheduled send, a retry): it becomes
/// `skipped` with reason `cancelled`. 400 once a worker holds it or it is final.
#[utoipa::path(
    tag = "messages", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("messageId" = String, Path, description = "Message id")),
    responses((status = 200, body = MessageDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/messages/{messageId}/cancel")]
pub(crate) async fn cancel_message(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<MessageDto>, ApiError> {
    let id: MessageId = record_id(&path.1)?;
    cancel(services, member, messages::MessageToCancel::Id(id)).await
}

/// Cancel the message a send with this `Idempotency-Key` queued, as
/// `POST …/messages/{messageId}/cancel` does; 404 when the key names none.
#[utoipa::path(
    tag = "messages", request_body = CancelByKeyBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = MessageDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/messages/cancel")]
pub(crate) async fn cancel_message_by_key(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<CancelByKeyBody>,
) -> Result<web::Json<MessageDto>, ApiError> {
    let key = body
        .0
        .idempotency_key
        .filter(|key| !key.trim().is_empty())
        .ok_or_else(|| AppError::invalid("idempotencyKey", "is required"))?;
    cancel(
        services,
        member,
        messages::MessageToCancel::IdempotencyKey(key),
    )
    .await
}
