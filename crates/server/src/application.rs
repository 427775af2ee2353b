//! Wiring: adapters into ports, ports into use cases, use cases behind HTTP.

use std::{net::TcpListener, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use mailroom_app::{
    auth::MembershipCache,
    feedback_sources::{CertificateCache, SnsSettings},
    ports::Clock,
    templates::{AccountSlots, PreviewSlots, MAX_IMPORTS_PER_ACCOUNT},
    tokens::TokenCache,
    tracking::LinkSettings,
    Services,
};
use mailroom_dns::{DnsResolver, DnsSettings};
use mailroom_http::{pages::PageTemplates, HttpOptions, Metrics};
use mailroom_postgres::{
    ensure_database_exists, run_migrations, PgDatabase, PgQueueWakeup, PoolSettings,
};
use mailroom_smtp::{
    MailerSettings, ProbeSettings, RsaDkimKeys, SmtpMailer, SmtpPoolSettings, SmtpProbe,
};
use mailroom_webhook::{
    EgressUrlGuard, HyperSnsClient, HyperWebhookSender, SenderSettings, SNS_TIMEOUT,
};

use crate::{
    config::{redact_url, Config},
    domain_dns::ResolverDomainDns,
    system::{SealingSecrets, SystemClock, UuidV7Ids},
};

/// Creates the database when missing and applies pending migrations.
///
/// # Errors
/// When PostgreSQL cannot be reached or a migration fails.
pub fn prepare_database(url: &str) -> Result<()> {
    if ensure_database_exists(url).with_context(|| format!("connecting to {}", redact_url(url)))? {
        tracing::info!(url = %redact_url(url), "created the database");
    }
    let applied = run_migrations(url).context("running migrations")?;
    if !applied.is_empty() {
        tracing::info!(?applied, "applied migrations");
    }
    Ok(())
}

/// The use-case dependencies for `config`, with the given clock.
///
/// # Errors
/// When the pool cannot be built.
pub fn build_services(config: &Config, clock: Arc<dyn Clock>) -> Result<(Services, PgDatabase)> {
    let database = PgDatabase::connect(
        &config.database_url,
        &PoolSettings {
            max_size: config.db_pool_size,
            connection_timeout: Duration::from_secs(5),
            // The requests' timeout, so a request's single statement (an event) needs no
            // transaction to be bounded; the workers' transactions reset it to the
            // server's setting (`PgDatabase::with_statement_timeout`).
            statement_timeout: config.statement_timeout,
        },
    )?;
    // One resolver for every outbound connection (mail servers and webhooks): one bound
    // on concurrent lookups, one cache, one thread.
    let resolver = DnsResolver::new(DnsSettings {
        nameserver: config.dns_server,
        ..DnsSettings::default()
    })
    .context("the DNS resolver")?;
    let domain_dns = Arc::new(ResolverDomainDns::new(resolver.clone()));
    let services = Services {
        db: Arc::new(database.clone()),
        clock,
        ids: Arc::new(UuidV7Ids),
        secrets: Arc::new(SealingSecrets::with_previous(
            &config.secret_key,
            config.secret_key_previous.as_ref(),
        )),
        mail_server_probe: Arc::new(
            SmtpProbe::new(ProbeSettings {
                allow_private_egress: config.allow_private_egress,
                timeout: Duration::from_secs(10),
            })
            .with_resolver(resolver.clone()),
        ),
        webhook_url_guard: Arc::new(EgressUrlGuard::new(
            config.allow_private_egress,
            resolver.clone(),
        )),
        webhook_sender: Arc::new(HyperWebhookSender::new(SenderSettings {
            allow_private_egress: config.allow_private_egress,
            timeout: config.webhook_timeout,
            extra_roots: Vec::new(),
            resolver: resolver.clone(),
        })),
        sns: SnsSettings {
            client: Arc::new(HyperSnsClient::new(
                config.allow_private_egress,
                resolver.clone(),
                SNS_TIMEOUT,
            )),
            test_origin: config.sns_test_origin.clone(),
            certificates: Arc::new(CertificateCache::default()),
        },
        // Every process that queues mail (the API, the workers' expansion, inbound) wakes
        // the message workers of every process.
        queue_wakeup: Arc::new(PgQueueWakeup::new(&database).context("the queue wake-up thread")?),
        mailer: Arc::new({
            let settings = MailerSettings {
                allow_private_egress: config.allow_private_egress,
                timeout: config.smtp_timeout,
                pool: SmtpPoolSettings {
                    max_connections: config.smtp_connections_per_server,
                    messages_per_second: config.smtp_rate_limit,
                    ..SmtpPoolSettings::default()
                },
            };
            match &config.smtp_hello_name {
                Some(name) => SmtpMailer::with_hello_name(settings, name.clone()),
                None => SmtpMailer::new(settings),
            }
            .with_resolver(resolver)
        }),
        links: LinkSettings {
            public_url: config.public_url.trim_end_matches('/').to_owned(),
            unsubscribe_mailto: config.unsubscribe_mailto.clone(),
        },
        dkim_keys: Arc::new(RsaDkimKeys),
        domain_dns,
        inbound_host: config.inbound_host.clone(),
        max_accounts_per_user: config.max_accounts_per_user,
        token_cache: Arc::new(TokenCache::default()),
        membership_cache: Arc::new(MembershipCache::default()),
        suppression_keys: Arc::default(),
        // Previews get children of their own, apart from the workers', and a shorter
        // deadline (crate::render_sandbox).
        renderer: Arc::new(crate::render_sandbox::Renderer::for_previews(
            config.render_program.clone(),
        )),
        previews: Arc::new(PreviewSlots::default()),
        imports: Arc::new(AccountSlots::with_limit(MAX_IMPORTS_PER_ACCOUNT)),
    };
    Ok((services, database))
}

/// A running HTTP API bound to its port.
pub struct Application {
    port: u16,
    metrics_port: Option<u16>,
    inbound: Option<mailroom_smtp::inbound::InboundListener>,
    inbound_port: Option<u16>,
    services: Services,
    server: actix_web::dev::Server,
}

impl Application {
    /// Migrates, wires and binds, with the system clock.
    ///
    /// # Errors
    /// When the database or the listen address cannot be used.
    pub fn build(config: &Config) -> Result<Self> {
        Self::build_with_clock(config, Arc::new(SystemClock))
    }

    /// As [`Application::build`] with a substitute clock (tests move time with it).
    ///
    /// # Errors
    /// When the database or the listen address cannot be used.
    pub fn build_with_clock(config: &Config, clock: Arc<dyn Clock>) -> Result<Self> {
        // Before anything else: a broken template override stops the start with its
        // file and line, rather than breaking pages later.
        let page_templates = Arc::new(PageTemplates::load(config.page_templates.as_deref())?);
        if !page_templates.overridden().is_empty() {
            tracing::info!(overridden = ?page_templates.overridden(), "page templates overridden");
        }
        prepare_database(&config.database_url)?;
        let (services, database) = build_services(config, clock)?;
        let listener = TcpListener::bind(config.listen)
            .with_context(|| format!("binding {}", config.listen))?;
        let port = listener.local_addr()?.port();
        let request_database = database.with_statement_timeout(config.statement_timeout);
        let metrics = Arc::new(process_metrics(database));
        // With a separate metrics listener, `/metrics` is served there only (the same
        // series: the API's requests are counted in `metrics` either way).
        let metrics_port = match config.metrics_listen {
            Some(address) => Some(serve_metrics_on(
                address,
                services.clone(),
                metrics.clone(),
            )?),
            None => None,
        };
        let options = HttpOptions {
            workers: config.http_workers,
            rate_limit: config.rate_limit,
            auth_failure_limit: config.auth_failure_limit,
            trusted_proxies: config.trusted_proxies.clone(),
            import_idle_timeout: config.import_idle_timeout,
            serve_metrics: metrics_port.is_none(),
            page_templates: Some(page_templates),
            ..HttpOptions::default()
        };
        // Request transactions get the statement timeout; the workers' (which use
        // `services`) keep the server's setting, since a large announcement batch may
        // rightly take longer than any request should.
        let request_services = Services {
            db: Arc::new(request_database),
            ..services.clone()
        };
        // Bound here with the API's port, served by `run_until_stopped`: the inbound
        // listener's transactions are the workers' kind (no statement timeout).
        let inbound = match config.inbound.listen {
            Some(address) => Some(crate::inbound::bind_inbound(
                config,
                address,
                services.clone(),
            )?),
            None => None,
        };
        let inbound_port = match &inbound {
            Some(listener) => Some(listener.local_addr()?.port()),
            None => None,
        };
        let server = mailroom_http::serve(listener, request_services, metrics, &options)?;
        Ok(Self {
            port,
            metrics_port,
            inbound,
            inbound_port,
            services,
            server,
        })
    }

    /// The bound port (useful when the configuration asked for port 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the separate metrics listener (`MAILROOM_METRICS_LISTEN`), if any.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_port
    }

    /// The port of the inbound SMTP listener (`MAILROOM_INBOUND_LISTEN`), if any.
    pub fn inbound_port(&self) -> Option<u16> {
        self.inbound_port
    }

    /// The wired use-case dependencies.
    pub fn services(&self) -> Services {
        self.services.clone()
    }

    /// Serves until SIGTERM/SIGINT, then finishes in-flight requests.
    ///
    /// # Errors
    /// An I/O error of the server.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let inbound = self.inbound.map(|listener| {
            tokio::spawn(async move {
                if let Err(error) = listener.run().await {
                    tracing::error!(%error, "the inbound SMTP listener stopped");
                }
            })
        });
        let served = self.server.await;
        if let Some(inbound) = inbound {
            inbound.abort();
        }
        served
    }
}

/// The HTTP layer's metrics over this process's pool, exposing with them the delivery
/// counters the server owns ([`crate::metrics`]).
fn process_metrics(database: PgDatabase) -> Metrics {
    Metrics::new(
        Arc::new(move || database.pool_state()),
        vec![crate::metrics::delivery_counters().registry().clone()],
    )
}

/// Serves `/metrics` and `/healthz` on `address` from a thread of its own (an actix
/// system beside the workers' tokio runtime or the API's), for `mailroom worker`, and
/// for `serve` when `MAILROOM_METRICS_LISTEN` is set. The thread ends with
/// the process.
///
/// # Errors
/// When the address cannot be bound.
pub fn spawn_metrics_listener(
    address: std::net::SocketAddr,
    services: Services,
    database: PgDatabase,
) -> Result<u16> {
    serve_metrics_on(address, services, Arc::new(process_metrics(database)))
}

fn serve_metrics_on(
    address: std::net::SocketAddr,
    services: Services,
    metrics: Arc<Metrics>,
) -> Result<u16> {
    let listener =
        TcpListener::bind(address).with_context(|| format!("binding {address} for metrics"))?;
    let port = listener.local_addr()?.port();
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            let served = actix_web::rt::System::new().block_on(async move {
                mailroom_http::metrics_server::serve_metrics(listener, services, metrics)?.await
            });
            if let Err(error) = served {
                tracing::error!(%error, "the metrics listener stopped");
            }
        })
        .context("starting the metrics thread")?;
    Ok(port)
}
