//! `/v2/accounts/{accountId}/automations`.

use actix_web::{delete, get, patch, post, web};
use mailroom_app::{automations, Services};
use mailroom_domain::AutomationId;

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::automations_dto::{AutomationBody, AutomationDto, AutomationListItemDto},
    tenancy::Membership,
};

/// One page of the account's automations, oldest first, each joined with its template.
#[utoipa::path(
    tag = "automations", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<AutomationListItemDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/automations")]
pub(crate) async fn list_automations(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<AutomationListItemDto>>, ApiError> {
    let page = paging.0;
    let list =
        run_blocking(move || automations::list_automations(&services, &member.0, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(AutomationListItemDto::from).collect(),
        page,
    )))
}

/// How many automations the account holds.
#[utoipa::path(
    tag = "automations", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/automations/count")]
pub(crate) async fn count_automations(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count = run_blocking(move || automations::count_automations(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// One automation.
#[utoipa::path(
    tag = "automations", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("automationId" = String, Path, description = "Automation id")),
    responses((status = 200, body = AutomationDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/automations/{automationId}")]
pub(crate) async fn get_automation(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<AutomationDto>, ApiError> {
    let id: AutomationId = record_id(&path.1)?;
    let found = run_blocking(move || automations::get_automation(&services, &member.0, id)).await?;
    Ok(web::Json(found.into()))
}

/// Create an automation (a complete body).
#[utoipa::path(
    tag = "automations", request_body = AutomationBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = AutomationDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/automations")]
pub(crate) async fn create_automation(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<AutomationBody>,
) -> Result<web::Json<AutomationDto>, ApiError> {
    let input = body.0.into();
    let created =
        run_blocking(move || automations::create_automation(&services, &member.0, input)).await?;
    Ok(web::Json(created.into()))
}

/// Update an automation with the same complete body as create (no sparse patch).
#[utoipa::path(
    tag = "automations", request_body = AutomationBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("automationId" = String, Path, description = "Automation id")),
    responses((status = 200, body = AutomationDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[patch("/accounts/{accountId}/automations/{automationId}")]
pub(crate) async fn update_automation(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<AutomationBody>,
) -> Result<web::Json<AutomationDto>, ApiError> {
    let id: AutomationId = record_id(&path.1)?;
    let input = body.0.into();
    let updated =
        run_blocking(move || automations::update_automation(&services, &member.0, id, input))
            .await?;
    Ok(web::Json(updated.into()))
}

/// Delete an automation; its messages stay in the log.
#[utoipa::path(
    tag = "automations", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("automationId" = String, Path, description = "Automation id")),
    responses((status = 200, body = AutomationDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/automations/{automationId}")]
pub(crate) async fn delete_automation(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<AutomationDto>, ApiError> {
    let id: AutomationId = record_id(&path.1)?;
    let deleted =
        run_blocking(move || automations::delete_automation(&services, &member.0, id)).await?;
    Ok(web::Json(deleted.into()))
}
