//! `/v2/accounts/{accountId}/domains`: sending domains.

use actix_web::{delete, get, post, web};
use mailroom_app::{domains, Services};
use mailroom_domain::SendingDomainId;

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::domains_dto::{DomainBody, DomainDto},
    tenancy::Membership,
};

/// One page of the account's sending domains, oldest first.
#[utoipa::path(
    tag = "domains", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<DomainDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/domains")]
pub(crate) async fn list_domains(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<DomainDto>>, ApiError> {
    let page = paging.0;
    let list = run_blocking(move || domains::list_domains(&services, &member.0, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(DomainDto::of).collect(),
        page,
    )))
}

/// How many sending domains the account holds.
#[utoipa::path(
    tag = "domains", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/domains/count")]
pub(crate) async fn count_domains(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count = run_blocking(move || domains::count_domains(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// One sending domain with its records.
#[utoipa::path(
    tag = "domains", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("domainId" = String, Path, description = "Sending domain id")),
    responses((status = 200, body = DomainDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/domains/{domainId}")]
pub(crate) async fn get_domain(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<DomainDto>, ApiError> {
    let id: SendingDomainId = record_id(&path.1)?;
    let found = run_blocking(move || domains::get_domain(&services, &member.0, id)).await?;
    Ok(web::Json(DomainDto::of(found)))
}

/// Add a sending domain: a 2048-bit DKIM key is made for it, and `records` lists what to
/// publish in DNS before calling verify.
#[utoipa::path(
    tag = "domains", request_body = DomainBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = DomainDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/domains")]
pub(crate) async fn create_domain(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<DomainBody>,
) -> Result<web::Json<DomainDto>, ApiError> {
    let name = body.0.name;
    let created = run_blocking(move || domains::create_domain(&services, &member.0, name)).await?;
    Ok(web::Json(DomainDto::of(created)))
}

/// Look the domain's records up in DNS now; answers the domain after the check.
#[utoipa::path(
    tag = "domains", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("domainId" = String, Path, description = "Sending domain id")),
    responses((status = 200, body = DomainDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/domains/{domainId}/verify")]
pub(crate) async fn verify_domain(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<DomainDto>, ApiError> {
    let id: SendingDomainId = record_id(&path.1)?;
    let checked = run_blocking(move || domains::verify_domain(&services, &member.0, id)).await?;
    Ok(web::Json(DomainDto::of(checked)))
}

/// Add a new DKIM key (a new selector). It signs once its record is published and a
/// verify finds it; the older key signs until then and stays listed until removed.
#[utoipa::path(
    tag = "domains", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("domainId" = String, Path, description = "Sending domain id")),
    responses((status = 200, body = DomainDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/domains/{domainId}/rotate")]
pub(crate) async fn rotate_domain_key(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<DomainDto>, ApiError> {
    let id: SendingDomainId = record_id(&path.1)?;
    let rotated =
        run_blocking(move || domains::rotate_domain_key(&services, &member.0, id)).await?;
    Ok(web::Json(DomainDto::of(rotated)))
}

/// Remove one DKIM key of the domain (not its only one); answers the domain.
#[utoipa::path(
    tag = "domains", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("domainId" = String, Path, description = "Sending domain id"),
        ("selector" = String, Path, description = "The key's selector"),
    ),
    responses((status = 200, body = DomainDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/domains/{domainId}/selectors/{selector}")]
pub(crate) async fn remove_selector(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String, String)>,
) -> Result<web::Json<DomainDto>, ApiError> {
    let (_, domain, selector) = path.into_inner();
    let id: SendingDomainId = record_id(&domain)?;
    let left =
        run_blocking(move || domains::remove_selector(&services, &member.0, id, &selector)).await?;
    Ok(web::Json(DomainDto::of(left)))
}

/// Delete a sending domain and its keys.
#[utoipa::path(
    tag = "domains", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("domainId" = String, Path, description = "Sending domain id")),
    responses((status = 200, body = DomainDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/domains/{domainId}")]
pub(crate) async fn delete_domain(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<DomainDto>, ApiError> {
    let id: SendingDomainId = record_id(&path.1)?;
    let deleted = run_blocking(move || domains::delete_domain(&services, &member.0, id)).await?;
    Ok(web::Json(DomainDto::of(deleted)))
}
