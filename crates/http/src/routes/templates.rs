//! `/v2/accounts/{accountId}/templates`.

use actix_web::{delete, get, patch, post, web};
use mailroom_app::{templates, Services};
use mailroom_domain::TemplateId;

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::templates_dto::{TemplateBody, TemplateDto},
    tenancy::Membership,
};

/// One page of the account's templates.
#[utoipa::path(
    tag = "templates", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<TemplateDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/templates")]
pub(crate) async fn list_templates(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<TemplateDto>>, ApiError> {
    let page = paging.0;
    let list = run_blocking(move || templates::list_templates(&services, &member.0, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(TemplateDto::from).collect(),
        page,
    )))
}

/// How many templates the account holds.
#[utoipa::path(
    tag = "templates", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/templates/count")]
pub(crate) async fn count_templates(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count = run_blocking(move || templates::count_templates(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// One template.
#[utoipa::path(
    tag = "templates", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("templateId" = String, Path, description = "Template id")),
    responses((status = 200, body = TemplateDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/templates/{templateId}")]
pub(crate) async fn get_template(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<TemplateDto>, ApiError> {
    let template: TemplateId = record_id(&path.1)?;
    let found =
        run_blocking(move || templates::get_template(&services, &member.0, template)).await?;
    Ok(web::Json(found.into()))
}

/// Create a template.
#[utoipa::path(
    tag = "templates", request_body = TemplateBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = TemplateDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/templates")]
pub(crate) async fn create_template(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<TemplateBody>,
) -> Result<web::Json<TemplateDto>, ApiError> {
    let input = body.0.into();
    let created =
        run_blocking(move || templates::create_template(&services, &member.0, input)).await?;
    Ok(web::Json(created.into()))
}

/// Partially update a template: omitted keys stay, null clears the clearable fields.
#[utoipa::path(
    tag = "templates", request_body = TemplateBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("templateId" = String, Path, description = "Template id")),
    responses((status = 200, body = TemplateDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[patch("/accounts/{accountId}/templates/{templateId}")]
pub(crate) async fn update_template(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<TemplateBody>,
) -> Result<web::Json<TemplateDto>, ApiError> {
    let template: TemplateId = record_id(&path.1)?;
    let input = body.0.into();
    let updated =
        run_blocking(move || templates::update_template(&services, &member.0, template, input))
            .await?;
    Ok(web::Json(updated.into()))
}

/// Delete a template (refused while an automation sends it).
#[utoipa::path(
    tag = "templates", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("templateId" = String, Path, description = "Template id")),
    responses((status = 200, body = TemplateDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/templates/{templateId}")]
pub(crate) async fn delete_template(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<TemplateDto>, ApiError> {
    let template: TemplateId = record_id(&path.1)?;
    let deleted =
        run_blocking(move || templates::delete_template(&services, &member.0, template)).await?;
    Ok(web::Json(deleted.into()))
}
