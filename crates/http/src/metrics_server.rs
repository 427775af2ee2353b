//! A listener with only `/metrics` and `/healthz`, for processes that serve no API
//! (`mailroom worker` with `MAILROOM_METRICS_LISTEN`): their delivery counters and pool
//! gauges would otherwise never be scraped.

use std::{net::TcpListener, sync::Arc};

use actix_web::{dev::Server, web, App, HttpServer};
use mailroom_app::Services;

use crate::{routes::system, Metrics};

/// Starts the metrics listener on `listener`, on the current actix system. It installs no
/// signal handlers: the process that owns it decides when to stop.
///
/// # Errors
/// An I/O error when the listener cannot be used.
pub fn serve_metrics(
    listener: TcpListener,
    services: Services,
    metrics: Arc<Metrics>,
) -> std::io::Result<Server> {
    let services = web::Data::new(services);
    let metrics = web::Data::from(metrics);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(services.clone())
            .app_data(metrics.clone())
            .service(system::metrics)
            .service(system::healthz)
    })
    .listen(listener)?
    .workers(1)
    .disable_signals()
    .run();
    Ok(server)
}
