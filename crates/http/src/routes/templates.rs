//! `/v2/accounts/{accountId}/templates`.

use actix_web::{delete, get, patch, post, web};
use mailroom_app::{templates, AppError, Services};
use mailroom_domain::{email::EmailAddress, TemplateId};

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::{
        messages_dto::MessageDto,
        templates_dto::{PreviewBody, PreviewDto, TemplateBody, TemplateDto, TestSendBody},
    },
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

/// Render the stored template as a send would, without storing or sending anything:
/// `email` lends that contact's attributes as at send time, `data` adds variables as in a
/// send. Rendered in the render sandbox with the delivery path's memory bound and a
/// deadline of 2 s. A syntax error is a 400 naming the field and line; a template that
/// fails to render, or renders past the deadline, is a 400 naming why. An account has at
/// most 2 previews rendering at once: a third is a 429.
#[utoipa::path(
    tag = "templates", request_body = PreviewBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("templateId" = String, Path, description = "Template id")),
    responses((status = 200, body = PreviewDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem), (status = 429, body = Problem, description = "The account already has 2 previews rendering"), (status = 503, body = Problem))
)]
#[post("/accounts/{accountId}/templates/{templateId}/preview")]
pub(crate) async fn preview_template(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<PreviewBody>,
) -> Result<web::Json<PreviewDto>, ApiError> {
    let template: TemplateId = record_id(&path.1)?;
    let body = body.0;
    let email = body
        .email
        .as_deref()
        .map(EmailAddress::parse)
        .transpose()
        .map_err(|error| AppError::invalid("email", error.to_string()))?;
    let request = templates::PreviewRequest {
        email,
        data: body.data.unwrap_or_default(),
    };
    let rendered =
        run_blocking(move || templates::preview_template(&services, &member.0, template, &request))
            .await?;
    Ok(web::Json(rendered.into()))
}

/// Queue one test send of the template to `email`: an ordinary transactional message
/// through the normal pipeline, marked `test: true` in the message log. It makes and
/// changes no contact. Answers the message (`queued`).
#[utoipa::path(
    tag = "templates", request_body = TestSendBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("templateId" = String, Path, description = "Template id")),
    responses((status = 200, body = MessageDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/templates/{templateId}/test-send")]
pub(crate) async fn test_send_template(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<TestSendBody>,
) -> Result<web::Json<MessageDto>, ApiError> {
    let template: TemplateId = record_id(&path.1)?;
    let body = body.0;
    let email = match body.email.as_deref() {
        None => return Err(AppError::invalid("email", "is required").into()),
        Some(email) => EmailAddress::parse(email)
            .map_err(|error| AppError::invalid("email", error.to_string()))?,
    };
    let data = body.data.unwrap_or_default();
    let queued =
        run_blocking(move || templates::test_send(&services, &member.0, template, &email, data))
            .await?;
    Ok(web::Json(MessageDto::from(queued)))
}
