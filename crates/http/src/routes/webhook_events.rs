//! `/v2/accounts/{accountId}/webhook-events`: the delivery log, and manual retry.

use actix_web::{get, post, web};
use mailroom_app::{webhook_events, AppError, Services};
use mailroom_domain::{
    webhook::WebhookEventType,
    webhook_event::{WebhookEventFilter, WebhookEventStatus},
    ValidationErrors, WebhookEventId,
};

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, Paging},
    problem::{ApiError, Problem},
    routes::webhook_events_dto::{WebhookEventDto, WebhookEventListParams},
    tenancy::Membership,
};

/// Parses the list's filters; an unknown value is a 400 naming the parameter.
fn event_filter(params: WebhookEventListParams) -> Result<WebhookEventFilter, ApiError> {
    let mut errors = ValidationErrors::new();
    let mut filter = WebhookEventFilter::default();
    if let Some(status) = params.status.as_deref() {
        match WebhookEventStatus::parse(status) {
            Some(status) => filter.status = Some(status),
            None => errors.push(
                "status",
                "must be one of queued, retrying, delivered, failed",
            ),
        }
    }
    if let Some(event) = params.event.as_deref() {
        match WebhookEventType::parse(event) {
            Some(event_type) => filter.event_type = Some(event_type),
            None => errors.push(
                "event",
                "must be one of contact.bounced, contact.complained, contact.deleted, contact.unsubscribed, \
                 contact.subscribed",
            ),
        }
    }
    errors.into_result().map_err(AppError::Invalid)?;
    Ok(filter)
}

/// One page of the account's webhook events, oldest first.
#[utoipa::path(
    tag = "webhook-events", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
        WebhookEventListParams,
    ),
    responses((status = 200, body = PageEnvelope<WebhookEventDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/webhook-events")]
pub(crate) async fn list_webhook_events(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
    params: web::Query<WebhookEventListParams>,
) -> Result<web::Json<PageEnvelope<WebhookEventDto>>, ApiError> {
    let filter = event_filter(params.into_inner())?;
    let page = paging.0;
    let list = run_blocking(move || {
        webhook_events::list_webhook_events(&services, &member.0, &filter, page)
    })
    .await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(WebhookEventDto::from).collect(),
        page,
    )))
}

/// How many webhook events the list shows under the same filters.
#[utoipa::path(
    tag = "webhook-events", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), WebhookEventListParams),
    responses((status = 200, body = CountDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/webhook-events/count")]
pub(crate) async fn count_webhook_events(
    services: web::Data<Services>,
    member: Membership,
    params: web::Query<WebhookEventListParams>,
) -> Result<web::Json<CountDto>, ApiError> {
    let filter = event_filter(params.into_inner())?;
    let count =
        run_blocking(move || webhook_events::count_webhook_events(&services, &member.0, &filter))
            .await?;
    Ok(web::Json(CountDto { count }))
}

/// One webhook event, with the outcome of its latest attempt.
#[utoipa::path(
    tag = "webhook-events", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("eventId" = String, Path, description = "Webhook event id")),
    responses((status = 200, body = WebhookEventDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/webhook-events/{eventId}")]
pub(crate) async fn get_webhook_event(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<WebhookEventDto>, ApiError> {
    let event: WebhookEventId = record_id(&path.1)?;
    let found =
        run_blocking(move || webhook_events::get_webhook_event(&services, &member.0, event))
            .await?;
    Ok(web::Json(WebhookEventDto::from(found)))
}

/// Re-queue a delivery: answers the new event (`queued`, `tryCount` 0, `parentEventId`,
/// `retriedByUserId`). Takes no body.
#[utoipa::path(
    tag = "webhook-events", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("eventId" = String, Path, description = "Webhook event id")),
    responses((status = 200, body = WebhookEventDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/webhook-events/{eventId}/retry")]
pub(crate) async fn retry_webhook_event(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<WebhookEventDto>, ApiError> {
    let event: WebhookEventId = record_id(&path.1)?;
    let retried =
        run_blocking(move || webhook_events::retry_webhook_event(&services, &member.0, event))
            .await?;
    Ok(web::Json(WebhookEventDto::from(retried)))
}
