//! Unauthenticated operational routes and the OpenAPI document.

use actix_web::{get, http::header, web, HttpResponse};
use mailroom_app::{operations::queue_stats, Services};
use serde::Serialize;

use crate::{
    blocking::run_blocking,
    metrics::{Metrics, MetricsExposure},
    problem::ApiError,
};

/// The generated OpenAPI document, serialised once at start-up.
pub struct OpenApiDocument(pub String);

/// Liveness and readiness answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HealthDto {
    /// `ok` or `ready`.
    pub status: &'static str,
}

/// Liveness: the process serves HTTP.
#[utoipa::path(tag = "operations", responses((status = 200, body = HealthDto)))]
#[get("/healthz")]
pub(crate) async fn healthz() -> web::Json<HealthDto> {
    web::Json(HealthDto { status: "ok" })
}

/// Readiness: the database answers. 503 while it does not.
#[utoipa::path(tag = "operations", responses((status = 200, body = HealthDto), (status = 503, body = crate::problem::Problem)))]
#[get("/readyz")]
pub(crate) async fn readyz(
    services: web::Data<Services>,
) -> Result<web::Json<HealthDto>, ApiError> {
    run_blocking(move || services.db.check_health().map_err(Into::into)).await?;
    Ok(web::Json(HealthDto { status: "ready" }))
}

/// Prometheus metrics in the text exposition format.
#[utoipa::path(tag = "operations", responses((status = 200, content_type = "text/plain", body = String)))]
#[get("/metrics")]
pub(crate) async fn metrics(
    metrics: web::Data<Metrics>,
    exposure: Option<web::Data<MetricsExposure>>,
    services: web::Data<Services>,
) -> Result<HttpResponse, ApiError> {
    // Served on the separate metrics listener only, when the process has one.
    if exposure.is_some_and(|exposure| !exposure.0) {
        return Err(mailroom_app::AppError::NotFound.into());
    }
    // A database outage must not take the process's own series down with it.
    let stats = match run_blocking(move || queue_stats(&services)).await {
        Ok(stats) => Some(stats),
        Err(error) => {
            tracing::warn!(%error, "metrics: reading the queue statistics failed");
            None
        }
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/plain; version=0.0.4"))
        .body(metrics.render(stats.as_ref())))
}

/// This API's OpenAPI 3.1 document.
#[utoipa::path(tag = "operations", responses((status = 200, content_type = "application/json", body = Object)))]
#[get("/openapi.json")]
pub(crate) async fn openapi_json(document: web::Data<OpenApiDocument>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .body(document.0.clone())
}
