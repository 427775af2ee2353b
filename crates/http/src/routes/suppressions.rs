//! `/v2/accounts/{accountId}/suppressions`: the addresses the account must not mail.

use actix_web::{delete, get, post, web, HttpRequest, HttpResponse};
use mailroom_app::{
    suppressions::{self, NewSuppression},
    AppError, Services,
};
use mailroom_domain::{
    email::EmailAddress,
    suppression::{SuppressionReason, SuppressionSource, MAX_SUPPRESSION_DETAIL},
    ValidationErrors,
};

use crate::{
    blocking::run_blocking,
    dto::{CountDto, PageEnvelope},
    extract::{JsonBody, Paging},
    problem::{ApiError, Problem},
    routes::{
        contacts_import::{import_csv_body, ImportLimits},
        suppressions_dto::{
            RemovedSuppressionsDto, SuppressionBody, SuppressionDto, SuppressionImportReportDto,
            SuppressionParams,
        },
    },
    tenancy::Membership,
};

/// The parameters parsed; a bad value is a 400 naming it.
struct Filter {
    email: Option<EmailAddress>,
    reason: Option<SuppressionReason>,
}

fn filter(params: SuppressionParams) -> Result<Filter, ApiError> {
    let mut errors = ValidationErrors::new();
    let email = params
        .email
        .and_then(|email| errors.collect("email", EmailAddress::parse(&email)));
    let reason = params.reason.and_then(|reason| {
        let parsed = SuppressionReason::parse(&reason);
        if parsed.is_none() {
            errors.push(
                "reason",
                "must be one of hard_bounce, complaint, unsubscribe, manual",
            );
        }
        parsed
    });
    errors.into_result().map_err(AppError::Invalid)?;
    Ok(Filter { email, reason })
}

/// One page of the account's suppression list, newest first; with `email`, that
/// address's entries.
#[utoipa::path(
    tag = "suppressions", security(("bearer" = [])),
    params(
        ("accountId" = String, Path, description = "Account id"),
        ("start" = Option<u64>, Query, description = "Zero-based offset (default 0)"),
        ("limit" = Option<u32>, Query, description = "Page size (default 25, clamped to 100)"),
        SuppressionParams,
    ),
    responses((status = 200, body = PageEnvelope<SuppressionDto>), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/suppressions")]
pub(crate) async fn list_suppressions(
    services: web::Data<Services>,
    member: Membership,
    paging: Paging,
    params: web::Query<SuppressionParams>,
) -> Result<web::Json<PageEnvelope<SuppressionDto>>, ApiError> {
    let Filter { email, reason } = filter(params.into_inner())?;
    let page = paging.0;
    let list = run_blocking(move || match email {
        Some(email) => {
            let mut found = suppressions::suppressions_of(&services, &member.0, &email)?;
            found.retain(|entry| reason.is_none_or(|reason| entry.reason == reason));
            let start = usize::try_from(page.start).unwrap_or(usize::MAX);
            Ok(found
                .into_iter()
                .skip(start)
                .take(page.limit as usize)
                .collect())
        }
        None => suppressions::list_suppressions(&services, &member.0, reason, page),
    })
    .await?;
    Ok(web::Json(PageEnvelope::page(
        list.into_iter().map(SuppressionDto::from).collect(),
        page,
    )))
}

/// How many entries the list holds, of one reason or all.
#[utoipa::path(
    tag = "suppressions", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), SuppressionParams),
    responses((status = 200, body = CountDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[get("/accounts/{accountId}/suppressions/count")]
pub(crate) async fn count_suppressions(
    services: web::Data<Services>,
    member: Membership,
    params: web::Query<SuppressionParams>,
) -> Result<web::Json<CountDto>, ApiError> {
    let Filter { email, reason } = filter(params.into_inner())?;
    let count = run_blocking(move || match email {
        Some(email) => Ok(suppressions::suppressions_of(&services, &member.0, &email)?
            .iter()
            .filter(|entry| reason.is_none_or(|reason| entry.reason == reason))
            .count() as u64),
        None => suppressions::count_suppressions(&services, &member.0, reason),
    })
    .await?;
    Ok(web::Json(CountDto { count }))
}

/// List an address by hand (`manual`): nothing is sent to it, transactional mail
/// included, until it is removed. Listing it again changes nothing.
#[utoipa::path(
    tag = "suppressions", request_body = SuppressionBody, security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses((status = 200, body = SuppressionDto), (status = 400, body = Problem), (status = 401, body = Problem))
)]
#[post("/accounts/{accountId}/suppressions")]
pub(crate) async fn add_suppression(
    services: web::Data<Services>,
    member: Membership,
    body: JsonBody<SuppressionBody>,
) -> Result<web::Json<SuppressionDto>, ApiError> {
    let body = body.0;
    let mut errors = ValidationErrors::new();
    let email = errors.collect("email", EmailAddress::parse(&body.email));
    let detail = body.detail.filter(|detail| !detail.is_empty());
    if let Some(detail) = &detail {
        if detail.chars().count() > MAX_SUPPRESSION_DETAIL {
            errors.push("detail", "must be at most 1000 characters");
        } else if detail.contains('\0') {
            errors.push("detail", "must not contain the NUL character");
        }
    }
    errors.into_result().map_err(AppError::Invalid)?;
    let input = NewSuppression {
        email: email.ok_or_else(|| AppError::Internal("a checked email is missing".into()))?,
        detail,
        source: SuppressionSource::Api,
    };
    let manual = run_blocking(move || {
        suppressions::add_suppression(&services, &member.0, &input)?
            .into_iter()
            .find(|entry| entry.reason == SuppressionReason::Manual)
            .ok_or_else(|| AppError::Internal("the manual entry was not written".into()))
    })
    .await?;
    Ok(web::Json(SuppressionDto::from(manual)))
}

/// Take an address off the list, for `reason` or for every reason; the account's contact
/// of that address loses the same marks and can be mailed again.
#[utoipa::path(
    tag = "suppressions", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id"), SuppressionParams),
    responses((status = 200, body = RemovedSuppressionsDto), (status = 400, body = Problem), (status = 401, body = Problem), (status = 404, body = Problem))
)]
#[delete("/accounts/{accountId}/suppressions")]
pub(crate) async fn remove_suppressions(
    services: web::Data<Services>,
    member: Membership,
    params: web::Query<SuppressionParams>,
) -> Result<web::Json<RemovedSuppressionsDto>, ApiError> {
    let Filter { email, reason } = filter(params.into_inner())?;
    let Some(email) = email else {
        let mut errors = ValidationErrors::new();
        errors.push("email", "is required: the address to take off the list");
        return Err(AppError::Invalid(errors).into());
    };
    let removed = run_blocking(move || {
        suppressions::remove_suppressions(&services, &member.0, &email, reason)
    })
    .await?;
    Ok(web::Json(RemovedSuppressionsDto {
        removed: removed.into_iter().map(SuppressionDto::from).collect(),
    }))
}

/// List addresses by hand from CSV: a header of `email` and optionally `detail`, one
/// address per line. Rows are applied in batches of 1,000, each in its own transaction;
/// bad rows are reported with their line and do not stop the others. The bounds are the
/// contact import's (200 MiB, 64 KiB a record, 30 s idle, 30 minutes, two imports of an
/// account at once, contacts and suppressions together). Sending a file again is safe.
#[utoipa::path(
    tag = "suppressions", security(("bearer" = [])),
    request_body(content = String, content_type = "text/csv", description = "CSV with a header row: `email`, optionally `detail`"),
    params(("accountId" = String, Path, description = "Account id")),
    responses(
        (status = 200, body = SuppressionImportReportDto),
        (status = 400, body = Problem),
        (status = 401, body = Problem),
        (status = 408, body = Problem, description = "The upload sent nothing for 30 s, or took longer than 30 minutes"),
        (status = 413, body = Problem),
        (status = 429, body = Problem, description = "The account already runs 2 imports")
    )
)]
#[post("/accounts/{accountId}/suppressions/import")]
pub(crate) async fn import_suppressions(
    services: web::Data<Services>,
    limits: web::Data<ImportLimits>,
    member: Membership,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<web::Json<SuppressionImportReportDto>, ApiError> {
    let summary = import_csv_body(
        services,
        **limits,
        member,
        &request,
        payload,
        suppressions::import_suppressions,
    )
    .await?;
    Ok(web::Json(summary.into()))
}

/// The whole list as CSV (`email,address_hash,reason,source,detail,created_at`, in
/// address-hash order; an erased address has an empty `email`), streamed a page of
/// 1,000 entries at a time, each read in a short transaction of its own: memory stays at
/// one page whatever the list's size, and no thread waits on a slow reader.
#[utoipa::path(
    tag = "suppressions", security(("bearer" = [])),
    params(("accountId" = String, Path, description = "Account id")),
    responses(
        (status = 200, content_type = "text/csv", body = String),
        (status = 401, body = Problem)
    )
)]
#[get("/accounts/{accountId}/suppressions/export")]
pub(crate) async fn export_suppressions(
    services: web::Data<Services>,
    member: Membership,
) -> Result<HttpResponse, ApiError> {
    // The first page is read before the answer starts, so a failure there is a status
    // code rather than a cut-off body.
    let member = member.0;
    let first = {
        let services = services.clone();
        run_blocking(move || suppressions::export_page(&services, &member, None)).await?
    };
    // Once the answer has started, a failure can only cut the body short (the client
    // sees a body that ends without the rest); it is logged.
    fn cut_short(error: impl std::fmt::Debug) -> std::io::Error {
        tracing::warn!(?error, "a suppression export stopped part way");
        std::io::Error::other(format!("{error:?}"))
    }
    let pages = futures_util::stream::try_unfold(
        (Some(first), true, services),
        move |(page, header, services)| async move {
            let Some(page) = page else {
                return Ok(None);
            };
            let bytes = suppressions::export_csv(&page, header).map_err(cut_short)?;
            let next = if page.len() < suppressions::EXPORT_PAGE as usize {
                None
            } else {
                let after = page.last().map(|entry| (entry.address_hash, entry.reason));
                let reader = services.clone();
                let next = run_blocking(move || suppressions::export_page(&reader, &member, after))
                    .await
                    .map_err(cut_short)?;
                Some(next)
            };
            Ok::<_, std::io::Error>(Some((web::Bytes::from(bytes), (next, false, services))))
        },
    );
    Ok(HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            "content-disposition",
            "attachment; filename=\"suppressions.csv\"",
        ))
        .streaming(pages))
}
