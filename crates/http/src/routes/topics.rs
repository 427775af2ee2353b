//! `/v2/accounts/{accountId}/topics`.

use actix_web::{delete, get, patch, post, web};
use mailroom_app::{topics, Services};
use mailroom_domain::TopicId;

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::topics_dto::{TopicBody, TopicDto},
    tenancy::Membership,
};

/// One page of the account's topics.
#[utoipa::path(
    tag = "topics", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<TopicDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/topics")]
pub(crate) async fn list_topics(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<TopicDto>>, ApiError> {
    let page = paging.0;
    let list = run_blocking(move || topics::list_topics(&services, &member.0, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(TopicDto::from).collect(),
        page,
    )))
}

/// How many topics the account holds.
#[utoipa::path(
    tag = "topics", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/topics/count")]
pub(crate) async fn count_topics(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count = run_blocking(move || topics::count_topics(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// One topic.
#[utoipa::path(
    tag = "topics", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("topicId" = String, Path, description = "Topic id")),
    responses((status = 200, body = TopicDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/topics/{topicId}")]
pub(crate) async fn get_topic(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<TopicDto>, ApiError> {
    let topic: TopicId = record_id(&path.1)?;
    let found = run_blocking(move || topics::get_topic(&services, &member.0, topic)).await?;
    Ok(web::Json(TopicDto::from(found)))
}

/// Create a topic.
#[utoipa::path(
    tag = "topics", request_body = TopicBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = TopicDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/topics")]
pub(crate) async fn create_topic(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<TopicBody>,
) -> Result<web::Json<TopicDto>, ApiError> {
    let input = body.0.into();
    let created = run_blocking(move || topics::create_topic(&services, &member.0, input)).await?;
    Ok(web::Json(TopicDto::from(created)))
}

/// Partially update a topic; contacts' unsubscriptions from it are kept.
#[utoipa::path(
    tag = "topics", request_body = TopicBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("topicId" = String, Path, description = "Topic id")),
    responses((status = 200, body = TopicDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[patch("/accounts/{accountId}/topics/{topicId}")]
pub(crate) async fn update_topic(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<TopicBody>,
) -> Result<web::Json<TopicDto>, ApiError> {
    let topic: TopicId = record_id(&path.1)?;
    let input = body.0.into();
    let updated =
        run_blocking(move || topics::update_topic(&services, &member.0, topic, input)).await?;
    Ok(web::Json(TopicDto::from(updated)))
}

/// Delete a topic.
#[utoipa::path(
    tag = "topics", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("topicId" = String, Path, description = "Topic id")),
    responses((status = 200, body = TopicDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/topics/{topicId}")]
pub(crate) async fn delete_topic(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<TopicDto>, ApiError> {
    let topic: TopicId = record_id(&path.1)?;
    let deleted = run_blocking(move || topics::delete_topic(&services, &member.0, topic)).await?;
    Ok(web::Json(TopicDto::from(deleted)))
}
