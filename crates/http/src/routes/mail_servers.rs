//! `/v2/accounts/{accountId}/mail-servers`.

use actix_web::{delete, get, patch, post, web};
use mailroom_app::{mail_servers, Services};
use mailroom_domain::MailServerId;

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::mail_servers_dto::{MailServerBody, MailServerDto},
    tenancy::Membership,
};

/// One page of the account's mail servers (passwords masked).
#[utoipa::path(
    tag = "mail-servers", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<MailServerDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/mail-servers")]
pub(crate) async fn list_mail_servers(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<MailServerDto>>, ApiError> {
    let page = paging.0;
    let list =
        run_blocking(move || mail_servers::list_mail_servers(&services, &member.0, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(MailServerDto::read).collect(),
        page,
    )))
}

/// How many mail servers the account holds.
#[utoipa::path(
    tag = "mail-servers", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/mail-servers/count")]
pub(crate) async fn count_mail_servers(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count =
        run_blocking(move || mail_servers::count_mail_servers(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// One mail server (password masked).
#[utoipa::path(
    tag = "mail-servers", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("mailServerId" = String, Path, description = "Mail server id")),
    responses((status = 200, body = MailServerDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/mail-servers/{mailServerId}")]
pub(crate) async fn get_mail_server(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<MailServerDto>, ApiError> {
    let server: MailServerId = record_id(&path.1)?;
    let found =
        run_blocking(move || mail_servers::get_mail_server(&services, &member.0, server)).await?;
    Ok(web::Json(MailServerDto::read(found)))
}

/// Create a mail server; the settings and credentials are checked against the server first.
#[utoipa::path(
    tag = "mail-servers", request_body = MailServerBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = MailServerDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/mail-servers")]
pub(crate) async fn create_mail_server(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<MailServerBody>,
) -> Result<web::Json<MailServerDto>, ApiError> {
    let input = body.0.into();
    let saved =
        run_blocking(move || mail_servers::create_mail_server(&services, &member.0, input)).await?;
    Ok(web::Json(MailServerDto::saved(saved)))
}

/// Replace a mail server's settings (the complete object, password included).
#[utoipa::path(
    tag = "mail-servers", request_body = MailServerBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("mailServerId" = String, Path, description = "Mail server id")),
    responses((status = 200, body = MailServerDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[patch("/accounts/{accountId}/mail-servers/{mailServerId}")]
pub(crate) async fn update_mail_server(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<MailServerBody>,
) -> Result<web::Json<MailServerDto>, ApiError> {
    let server: MailServerId = record_id(&path.1)?;
    let input = body.0.into();
    let saved =
        run_blocking(move || mail_servers::update_mail_server(&services, &member.0, server, input))
            .await?;
    Ok(web::Json(MailServerDto::saved(saved)))
}

/// Delete a mail server (refused while a template prefers it).
#[utoipa::path(
    tag = "mail-servers", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("mailServerId" = String, Path, description = "Mail server id")),
    responses((status = 200, body = MailServerDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/mail-servers/{mailServerId}")]
pub(crate) async fn delete_mail_server(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<MailServerDto>, ApiError> {
    let server: MailServerId = record_id(&path.1)?;
    let deleted =
        run_blocking(move || mail_servers::delete_mail_server(&services, &member.0, server))
            .await?;
    Ok(web::Json(MailServerDto::read(deleted)))
}
