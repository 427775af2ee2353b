//! `/v2/accounts/{accountId}/segments`: saved segments, and the live count of one.

use actix_web::{delete, get, patch, post, web};
use mailroom_app::{segments, AppError, Services};
use mailroom_domain::{
    patch::Field, saved_segment::SegmentPatchInput, SegmentId, ValidationErrors,
};

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::{
        contacts::{condition_inputs, read_search, topic_id},
        segments_dto::{NewSegmentBody, SegmentDto, SegmentPatchBody},
    },
    tenancy::Membership,
};

/// One page of the account's segments, oldest first.
#[utoipa::path(
    tag = "segments", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<SegmentDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/segments")]
pub(crate) async fn list_segments(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<SegmentDto>>, ApiError> {
    let page = paging.0;
    let list = run_blocking(move || segments::list_segments(&services, &member.0, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(SegmentDto::from).collect(),
        page,
    )))
}

/// How many segments the account holds (at most 1,000).
#[utoipa::path(
    tag = "segments", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/segments/count")]
pub(crate) async fn count_segments(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count = run_blocking(move || segments::count_segments(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// One segment, with its definition.
#[utoipa::path(
    tag = "segments", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("segmentId" = String, Path, description = "Segment id")),
    responses((status = 200, body = SegmentDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/segments/{segmentId}")]
pub(crate) async fn get_segment(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<SegmentDto>, ApiError> {
    let id: SegmentId = record_id(&path.1)?;
    let found = run_blocking(move || segments::get_segment(&services, &member.0, id)).await?;
    Ok(web::Json(found.into()))
}

/// How many contacts are in the segment now: its definition counted as
/// `POST …/contacts/search/count` counts.
#[utoipa::path(
    tag = "segments", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("segmentId" = String, Path, description = "Segment id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/segments/{segmentId}/count")]
pub(crate) async fn count_segment_contacts(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<CountDto>, ApiError> {
    let id: SegmentId = record_id(&path.1)?;
    let count =
        run_blocking(move || segments::count_segment_contacts(&services, &member.0, id)).await?;
    Ok(web::Json(CountDto { count }))
}

/// Save a segment: a name and the body of `POST …/contacts/search`, checked as the
/// search checks it. An account holds at most 1,000 segments.
#[utoipa::path(
    tag = "segments", request_body = NewSegmentBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = SegmentDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/segments")]
pub(crate) async fn create_segment(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<NewSegmentBody>,
) -> Result<web::Json<SegmentDto>, ApiError> {
    let (name, search) = body.0.split();
    let mut errors = ValidationErrors::new();
    let definition = read_search(search, &mut errors).definition();
    errors.into_result().map_err(AppError::Invalid)?;
    let created = run_blocking(move || {
        segments::create_segment(&services, &member.0, name.as_deref(), definition)
    })
    .await?;
    Ok(web::Json(created.into()))
}

/// Partially update a segment (name and definition); announcements already made from it
/// keep the definition they copied.
#[utoipa::path(
    tag = "segments", request_body = SegmentPatchBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("segmentId" = String, Path, description = "Segment id")),
    responses((status = 200, body = SegmentDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[patch("/accounts/{accountId}/segments/{segmentId}")]
pub(crate) async fn update_segment(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
    body: JsonBody<SegmentPatchBody>,
) -> Result<web::Json<SegmentDto>, ApiError> {
    let id: SegmentId = record_id(&path.1)?;
    let body = body.0;
    let mut errors = ValidationErrors::new();
    let topic = match body.topic_id {
        Field::Absent => Field::Absent,
        Field::Null => Field::Null,
        Field::Value(text) => topic_id(&text, &mut errors).map_or(Field::Absent, Field::Value),
    };
    errors.into_result().map_err(AppError::Invalid)?;
    let input = SegmentPatchInput {
        name: body.name,
        attributes: body.attributes.map(condition_inputs),
        include_unsubscribed: body.include_unsubscribed,
        topic,
    };
    let updated =
        run_blocking(move || segments::update_segment(&services, &member.0, id, input)).await?;
    Ok(web::Json(updated.into()))
}

/// Delete a segment; announcements made from it are unchanged.
#[utoipa::path(
    tag = "segments", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("segmentId" = String, Path, description = "Segment id")),
    responses((status = 200, body = SegmentDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/segments/{segmentId}")]
pub(crate) async fn delete_segment(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<SegmentDto>, ApiError> {
    let id: SegmentId = record_id(&path.1)?;
    let deleted = run_blocking(move || segments::delete_segment(&services, &member.0, id)).await?;
    Ok(web::Json(deleted.into()))
}
