//! The HTTP driving adapter: actix-web routes under `/v2` onto the app crate's use cases.
//!
//! This crate holds no business rules. It parses requests into the app's inputs, runs the
//! use case on the blocking pool ([`blocking::run_blocking`]), and shapes the result as
//! JSON or as an `application/problem+json` error ([`problem::ApiError`]).

pub mod access_log;
pub mod auth_failures;
pub mod blocking;
pub mod console;
pub mod dto;
pub mod extract;
pub mod metrics;
pub mod metrics_server;
mod openapi_fixups;
pub mod pages;
pub mod problem;
pub mod rate_limit;
pub mod routes;
pub mod tenancy;

use std::{net::TcpListener, sync::Arc, time::Instant};

use actix_web::{
    dev::{Server, Service, ServiceFactory, ServiceRequest, ServiceResponse},
    guard::GuardContext,
    http::{header, Method},
    middleware::ErrorHandlers,
    web, App, HttpMessage, HttpRequest, HttpResponse, HttpServer, ResponseError,
};
use mailroom_app::Services;
use tracing_actix_web::RequestId;
use utoipa::{
    openapi::security::{Http, HttpAuthScheme, SecurityScheme},
    Modify, OpenApi,
};
use utoipa_actix_web::{scope, AppExt, UtoipaApp};

pub use metrics::Metrics;
use problem::ApiError;
pub use rate_limit::{RateLimit, RateLimiter};
use routes::system::OpenApiDocument;

/// The largest request body accepted (413 beyond).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(OpenApi)]
#[openapi(
    info(title = "Mailroom API", version = "2", description = "Email delivery and audience service."),
    modifiers(&BearerAuth),
    components(schemas(problem::Problem))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

fn routed_app() -> UtoipaApp<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .into_utoipa_app()
        .openapi(ApiDoc::openapi())
        .service(scope("/v2").configure(routes::v2))
        .configure(routes::operations)
        .configure(routes::links)
}

/// The OpenAPI document of every route this adapter serves.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut api = routed_app().split_for_parts().1;
    openapi_fixups::document_problem_media_type(&mut api);
    openapi_fixups::document_limit_as_clamped(&mut api);
    api
}

/// The browsable API reference at `/docs/`: Swagger UI, whose files are compiled into
/// the binary (utoipa-swagger-ui's `vendored` feature), reading the document served at
/// `/v2/openapi.json`. No CDN and no validator badge, so it works offline.
fn api_reference() -> utoipa_swagger_ui::SwaggerUi {
    utoipa_swagger_ui::SwaggerUi::new("/docs/{_:.*}").config(
        utoipa_swagger_ui::Config::new(["/v2/openapi.json"])
            .validator_url("none")
            .try_it_out_enabled(true),
    )
}

/// The API reference's own policy: its scripts, styles and images come from this server
/// only (Swagger UI sets inline styles, so `style-src` allows them; it runs no inline
/// script), it talks only to this origin (the document, "Try it out"), and no other site
/// may frame it.
const API_REFERENCE_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn api_reference_headers(headers: &mut header::HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(API_REFERENCE_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
}

/// `/docs` → `/docs/`: the page loads its files by relative paths.
async fn api_reference_redirect() -> HttpResponse {
    HttpResponse::PermanentRedirect()
        .insert_header((header::LOCATION, "/docs/"))
        .finish()
}

/// Paths and methods from the OpenAPI document, so an unmatched request can be told
/// apart: a known path with another method is 405 (with `Allow`), anything else 404.
struct RouteTable(Vec<(actix_web::dev::ResourceDef, String)>);

impl RouteTable {
    fn from_openapi(api: &utoipa::openapi::OpenApi) -> Self {
        let routes = api
            .paths
            .paths
            .iter()
            .map(|(path, item)| {
                let methods: Vec<&str> = [
                    ("GET", item.get.is_some()),
                    ("POST", item.post.is_some()),
                    ("PUT", item.put.is_some()),
                    ("PATCH", item.patch.is_some()),
                    ("DELETE", item.delete.is_some()),
                ]
                .into_iter()
                .filter_map(|(name, present)| present.then_some(name))
                .collect();
                (
                    actix_web::dev::ResourceDef::new(path.as_str()),
                    methods.join(", "),
                )
            })
            .collect();
        Self(routes)
    }

    fn allowed(&self, path: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(resource, _)| resource.is_match(path))
            .map(|(_, allow)| allow.as_str())
    }
}

async fn unmatched(req: HttpRequest, table: web::Data<RouteTable>) -> HttpResponse {
    let error = match table.allowed(req.match_info().as_str()) {
        Some(allow) => ApiError::method_not_allowed(allow.to_owned()),
        None => ApiError::not_found(),
    };
    error.error_response()
}

fn any_method(_: &GuardContext<'_>) -> bool {
    true
}

/// How the HTTP server runs.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Worker threads (actix workers; use cases run on the blocking pool).
    pub workers: usize,
    /// Seconds in-flight requests get to finish after SIGTERM.
    pub shutdown_timeout_secs: u64,
    /// The per-token rate limit; `None` turns limiting off.
    pub rate_limit: Option<RateLimit>,
    /// Failed authentications allowed per client address; `None` turns the guard off.
    pub auth_failure_limit: Option<RateLimit>,
    /// Peers whose `X-Forwarded-For` names the client (reverse proxies you run).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Whether this listener serves `/metrics` (`false` when a separate metrics listener
    /// does; the route then answers 404 here).
    pub serve_metrics: bool,
    /// The public pages' templates (`MAILROOM_PAGE_TEMPLATES`); `None`: the compiled-in
    /// defaults.
    pub page_templates: Option<Arc<pages::PageTemplates>>,
    /// How long a contact import's upload may send nothing before it is abandoned (408).
    pub import_idle_timeout: std::time::Duration,
    /// The limits of posts to public subscribe forms, per form and per address; `None`
    /// turns one off.
    pub form_post_limits: (Option<RateLimit>, Option<RateLimit>),
}

/// [`HttpOptions::import_idle_timeout`] by default (`MAILROOM_IMPORT_IDLE_TIMEOUT`).
pub const DEFAULT_IMPORT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            shutdown_timeout_secs: 30,
            rate_limit: Some(RateLimit::DEFAULT),
            auth_failure_limit: Some(auth_failures::DEFAULT_FAILURE_LIMIT),
            trusted_proxies: Vec::new(),
            serve_metrics: true,
            page_templates: None,
            import_idle_timeout: DEFAULT_IMPORT_IDLE_TIMEOUT,
            form_post_limits: (
                Some(routes::form_pages::PER_FORM_LIMIT),
                Some(routes::form_pages::PER_ADDRESS_LIMIT),
            ),
        }
    }
}

/// Starts the HTTP server on `listener`. The returned server stops gracefully on SIGTERM
/// or SIGINT: it stops accepting, lets in-flight requests finish, then resolves.
///
/// # Errors
/// An I/O error when the listener cannot be used.
pub fn serve(
    listener: TcpListener,
    services: Services,
    metrics: Arc<Metrics>,
    options: &HttpOptions,
) -> std::io::Result<Server> {
    let api = openapi();
    let document = web::Data::new(OpenApiDocument(
        api.to_json().map_err(std::io::Error::other)?,
    ));
    let table = web::Data::new(RouteTable::from_openapi(&api));
    let services = web::Data::new(services);
    let metrics = web::Data::from(metrics);
    // One limiter for all actix workers: a token's bucket must not depend on which
    // worker thread took the connection.
    let limiter = web::Data::new(RateLimiter::<mailroom_domain::TokenId>::new(
        options.rate_limit,
    ));
    let auth_failures = web::Data::new(auth_failures::AuthFailureGuard::new(
        options.auth_failure_limit,
        options.trusted_proxies.clone(),
    ));
    let exposure = web::Data::new(metrics::MetricsExposure(options.serve_metrics));
    let form_limits = web::Data::new(routes::form_pages::FormPostLimits::new(
        options.form_post_limits.0,
        options.form_post_limits.1,
    ));
    let import_limits = web::Data::new(routes::contacts_import::ImportLimits {
        idle: options.import_idle_timeout,
        overall: routes::contacts_import::IMPORT_DEADLINE,
    });
    let page_templates = web::Data::from(match &options.page_templates {
        Some(templates) => templates.clone(),
        None => Arc::new(pages::PageTemplates::load(None).map_err(std::io::Error::other)?),
    });
    let server = HttpServer::new(move || {
        let metrics_for_requests = metrics.clone();
        let (app, _) = routed_app().split_for_parts();
        app.service(api_reference())
            .route("/docs", web::get().to(api_reference_redirect))
            // A browser asks before a JSON post from another site (CORS); the answer is
            // not an operation of the API, so it stays out of the document.
            .route(
                "/f/{formKey}",
                web::method(Method::OPTIONS).to(routes::form_pages::preflight),
            )
            .configure(console::configure)
            .app_data(services.clone())
            .app_data(metrics.clone())
            .app_data(document.clone())
            .app_data(table.clone())
            .app_data(limiter.clone())
            .app_data(auth_failures.clone())
            .app_data(exposure.clone())
            .app_data(page_templates.clone())
            .app_data(import_limits.clone())
            .app_data(form_limits.clone())
            .app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
            .app_data(web::QueryConfig::default().error_handler(problem::query_error))
            .app_data(web::PathConfig::default().error_handler(problem::path_error))
            .default_service(
                web::route()
                    .guard(actix_web::guard::fn_guard(any_method))
                    .to(unmatched),
            )
            // Innermost: membership is proven before routing hands the request to a
            // handler, so before any extractor reads the body.
            .wrap(actix_web::middleware::from_fn(tenancy::require_membership))
            .wrap(ErrorHandlers::new().default_handler(problem::ensure_problem_body))
            .wrap_fn(move |req, srv| {
                let started = Instant::now();
                let method = req.method().clone();
                let metrics = metrics_for_requests.clone();
                let response = srv.call(req);
                async move {
                    let mut response = response.await?;
                    rate_limit::stamp_headers(&mut response);
                    if response.request().path().starts_with("/docs/") {
                        api_reference_headers(response.headers_mut());
                    }
                    let route = response
                        .request()
                        .match_pattern()
                        .unwrap_or_else(|| "unmatched".to_owned());
                    metrics.observe_request(
                        method.as_str(),
                        &route,
                        response.status().as_u16(),
                        started.elapsed(),
                    );
                    let request_id = response.request().extensions().get::<RequestId>().copied();
                    if let Some(id) = request_id {
                        if let Ok(value) = header::HeaderValue::from_str(&id.to_string()) {
                            response
                                .headers_mut()
                                .insert(header::HeaderName::from_static("x-request-id"), value);
                        }
                    }
                    Ok(response)
                }
            })
            .wrap(access_log::access_logger())
    })
    .listen(listener)?
    .workers(options.workers)
    .shutdown_timeout(options.shutdown_timeout_secs)
    .run();
    Ok(server)
}

/// Methods the API serves, for documentation of the 405 rule.
pub const SERVED_METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];
