//! `/v2/accounts/{accountId}/forms`: the account's subscribe forms (their public pages
//! are in `routes::form_pages`).

use actix_web::{delete, get, patch, post, web};
use mailroom_app::{forms, Services};
use mailroom_domain::FormId;

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::forms_dto::{FormBody, FormDto},
    tenancy::Membership,
};

/// One page of the account's subscribe forms, oldest first.
#[utoipa::path(
    tag = "forms", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<FormDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/forms")]
pub(crate) async fn list_forms(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<FormDto>>, ApiError> {
    let account = member.0.account();
    let page = paging.0;
    let list = run_blocking(move || forms::list_forms(&services, &member.0, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter()
            .map(|form| FormDto::of(account, form))
            .collect(),
        page,
    )))
}

/// How many forms the account holds.
#[utoipa::path(
    tag = "forms", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/forms/count")]
pub(crate) async fn count_forms(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count = run_blocking(move || forms::count_forms(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// One form.
#[utoipa::path(
    tag = "forms", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("formId" = String, Path, description = "Form id")),
    responses((status = 200, body = FormDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/forms/{formId}")]
pub(crate) async fn get_form(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<FormDto>, ApiError> {
    let account = member.0.account();
    let form: FormId = record_id(&path.1)?;
    let found = run_blocking(move || forms::get_form(&services, &member.0, form)).await?;
    Ok(web::Json(FormDto::of(account, found)))
}

/// Create a subscribe form (at most 50 per account).
#[utoipa::path(
    tag = "forms", request_body = FormBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = FormDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/forms")]
pub(crate) async fn create_form(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<FormBody>,
) -> Result<web::Json<FormDto>, ApiError> {
    let account = member.0.account();
    let input = body.0.into();
    let created = run_blocking(move || forms::create_form(&services, &member.0, input)).await?;
    Ok(web::Json(FormDto::of(account, created)))
}

/// Partially update a form: omitted fields are kept, `null` clears the template and the
/// redirects.
#[utoipa::path(
    tag = "forms", request_body = FormBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("formId" = String, Path, description = "Form id")),
    responses((status = 200, body = FormDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[patch("/accounts/{accountId}/forms/{formId}")]
pub(crate) async fn update_form(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<FormBody>,
) -> Result<web::Json<FormDto>, ApiError> {
    let account = member.0.account();
    let form: FormId = record_id(&path.1)?;
    let input = body.0.into();
    let updated =
        run_blocking(move || forms::update_form(&services, &member.0, form, input)).await?;
    Ok(web::Json(FormDto::of(account, updated)))
}

/// Delete a form; its confirmation links stop working.
#[utoipa::path(
    tag = "forms", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("formId" = String, Path, description = "Form id")),
    responses((status = 200, body = FormDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/forms/{formId}")]
pub(crate) async fn delete_form(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<FormDto>, ApiError> {
    let account = member.0.account();
    let form: FormId = record_id(&path.1)?;
    let deleted = run_blocking(move || forms::delete_form(&services, &member.0, form)).await?;
    Ok(web::Json(FormDto::of(account, deleted)))
}
