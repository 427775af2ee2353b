//! `/v2/accounts/{accountId}/announcements`: create (now or at `sendAt`), reads, and pause,
//! resume and cancel; no update path.

use actix_web::{get, post, web};
use mailroom_app::{announcements, Services};
use mailroom_domain::{announcement::AnnouncementControl, AnnouncementId};

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{record_id, JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::announcements_dto::{AnnouncementBody, AnnouncementDto},
    tenancy::Membership,
};

/// One page of the account's announcements, oldest first.
#[utoipa::path(
    tag = "announcements", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
    ),
    responses((status = 200, body = PageEnvelope<AnnouncementDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/announcements")]
pub(crate) async fn list_announcements(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
) -> Result<web::Json<PageEnvelope<AnnouncementDto>>, ApiError> {
    let page = paging.0;
    let list =
        run_blocking(move || announcements::list_announcements(&services, &member.0, page)).await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(AnnouncementDto::from).collect(),
        page,
    )))
}

/// How many announcements the account holds.
#[utoipa::path(
    tag = "announcements", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = CountDto), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/announcements/count")]
pub(crate) async fn count_announcements(
    services: web::Data<Services>,
    member: Membership,
) -> Result<web::Json<CountDto>, ApiError> {
    let count =
        run_blocking(move || announcements::count_announcements(&services, &member.0)).await?;
    Ok(web::Json(CountDto { count }))
}

/// One announcement with its template reference, audience settings, delivery status and
/// message counters (`counters`: queued, sending, sent, failed, bounced, skipped, opened,
/// clicked).
#[utoipa::path(
    tag = "announcements", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("announcementId" = String, Path, description = "Announcement id")),
    responses((status = 200, body = AnnouncementDto), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[get("/accounts/{accountId}/announcements/{announcementId}")]
pub(crate) async fn get_announcement(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<AnnouncementDto>, ApiError> {
    let id: AnnouncementId = record_id(&path.1)?;
    let (found, counters) =
        run_blocking(move || announcements::get_announcement_progress(&services, &member.0, id))
            .await?;
    let mut dto = AnnouncementDto::from(found);
    dto.counters = Some(counters.into());
    Ok(web::Json(dto))
}

/// Create and start an announcement: it answers at once, `running`; workers expand the
/// audience and send. With `sendAt` in the future it is `scheduled` until then.
#[utoipa::path(
    tag = "announcements", request_body = AnnouncementBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = AnnouncementDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/announcements")]
pub(crate) async fn create_announcement(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<AnnouncementBody>,
) -> Result<web::Json<AnnouncementDto>, ApiError> {
    let input = body.0.into();
    let created =
        run_blocking(move || announcements::create_announcement(&services, &member.0, input))
            .await?;
    Ok(web::Json(created.into()))
}

/// Runs `control` on the announcement and answers it with its counters.
async fn control(
    services: web::Data<Services>,
    member: Membership,
    path: &(String, String),
    control: AnnouncementControl,
) -> Result<web::Json<AnnouncementDto>, ApiError> {
    let id: AnnouncementId = record_id(&path.1)?;
    let (announcement, counters) = run_blocking(move || {
        announcements::control_announcement(&services, &member.0, id, control)
    })
    .await?;
    let mut dto = AnnouncementDto::from(announcement);
    dto.counters = Some(counters.into());
    Ok(web::Json(dto))
}

/// Pause a `running` announcement: its audience is expanded no further and its waiting
/// messages are held (messages a worker is sending finish). 400 for any other status.
#[utoipa::path(
    tag = "announcements", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("announcementId" = String, Path, description = "Announcement id")),
    responses((status = 200, body = AnnouncementDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/announcements/{announcementId}/pause")]
pub(crate) async fn pause_announcement(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<AnnouncementDto>, ApiError> {
    control(services, member, &path, AnnouncementControl::Pause).await
}

/// Resume a `paused` announcement: its held messages wait for the workers again, each due
/// when it was, and the expansion goes on. 400 for any other status.
#[utoipa::path(
    tag = "announcements", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("announcementId" = String, Path, description = "Announcement id")),
    responses((status = 200, body = AnnouncementDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/announcements/{announcementId}/resume")]
pub(crate) async fn resume_announcement(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<AnnouncementDto>, ApiError> {
    control(services, member, &path, AnnouncementControl::Resume).await
}

/// Cancel a `scheduled`, `running` or `paused` announcement for good: every message not
/// in a worker's hands becomes `skipped` with reason `cancelled`. 400 once it is final.
#[utoipa::path(
    tag = "announcements", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), ("announcementId" = String, Path, description = "Announcement id")),
    responses((status = 200, body = AnnouncementDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[post("/accounts/{accountId}/announcements/{announcementId}/cancel")]
pub(crate) async fn cancel_announcement(
    services: web::Data<Services>,
    member: Membership,
    path: web::Path<(String, String)>,
) -> Result<web::Json<AnnouncementDto>, ApiError> {
    control(services, member, &path, AnnouncementControl::Cancel).await
}
