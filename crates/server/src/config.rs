//! Operator configuration, read from the environment once at start-up (docs/configuration.md).
//! A bad value stops the process with a message naming the variable.

use std::{
    fs,
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine as _;
pub use mailroom_http::RateLimit;

/// The default webhook retry schedule, in seconds between attempts.
pub const DEFAULT_RETRY_SCHEDULE: [u64; 7] = [5, 300, 1800, 7200, 18000, 36000, 36000];

/// The total time one webhook delivery attempt may take (docs/design.md#10-webhooks).
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(15);

/// Attempts a message gets before a transient SMTP failure makes it `failed`.
pub const DEFAULT_MESSAGE_MAX_ATTEMPTS: u32 = 8;

/// The most accounts one user may own unless `MAILROOM_MAX_ACCOUNTS_PER_USER` says
/// otherwise: enough for a business's brands and a staging account, few enough that the
/// per-account bounds (lanes, webhook slots, imports, previews) stay bounded per user.
pub const DEFAULT_MAX_ACCOUNTS_PER_USER: u64 = 10;

/// The bound on each step of one SMTP session (connect, then the rest).
pub const DEFAULT_SMTP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a message claim holds unless renewed (`MAILROOM_MESSAGE_LEASE`).
pub const DEFAULT_MESSAGE_LEASE: Duration = Duration::from_secs(30);

/// SMTP connections open to one mail server at once, unless configured.
pub const DEFAULT_SMTP_CONNECTIONS_PER_SERVER: usize = 8;

/// How long one statement of a request's transaction may run, unless configured.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(15);

/// Everything the process is configured with.
#[derive(Clone)]
pub struct Config {
    /// PostgreSQL connection URL.
    pub database_url: String,
    /// Where the HTTP API listens.
    pub listen: SocketAddr,
    /// Base URL for links in mail (tracking, unsubscribe).
    pub public_url: String,
    /// An address for a `mailto:` entry of `List-Unsubscribe`
    /// (`MAILROOM_UNSUBSCRIBE_MAILTO`); unset leaves the header with the URL only.
    pub unsubscribe_mailto: Option<String>,
    /// 32-byte key that seals stored secrets.
    pub secret_key: [u8; 32],
    /// The key before the last rotation (`MAILROOM_SECRET_KEY_PREVIOUS`): it still opens
    /// values sealed under it, and never seals.
    pub secret_key_previous: Option<[u8; 32]>,
    /// Whether mail servers and webhooks may point at private addresses.
    pub allow_private_egress: bool,
    /// Seconds between webhook delivery attempts.
    pub webhook_retry_schedule: Vec<u64>,
    /// The total time of one webhook delivery attempt. Not an environment variable: 15 s
    /// is part of the contract with receivers; tests shorten it.
    pub webhook_timeout: Duration,
    /// Attempts per message before a transient failure is final
    /// (`MAILROOM_MESSAGE_MAX_ATTEMPTS`).
    pub message_max_attempts: u32,
    /// Messages an account may send per UTC calendar month; `None` (unset) is no limit
    /// (`MAILROOM_MONTHLY_SEND_LIMIT`).
    pub monthly_send_limit: Option<u64>,
    /// The most accounts one user may own (`MAILROOM_MAX_ACCOUNTS_PER_USER`, default
    /// [`DEFAULT_MAX_ACCOUNTS_PER_USER`]; `unlimited`: `None`).
    pub max_accounts_per_user: Option<u64>,
    /// The bound on each step of an SMTP session (`MAILROOM_SMTP_TIMEOUT`, seconds).
    pub smtp_timeout: Duration,
    /// How long a contact import's upload may send nothing (`MAILROOM_IMPORT_IDLE_TIMEOUT`,
    /// seconds).
    pub import_idle_timeout: Duration,
    /// How long a claimed message stays leased to the worker holding it unless renewed
    /// (`MAILROOM_MESSAGE_LEASE`, seconds, 5 to 3600; default 30). The worker renews the
    /// leases of everything it holds every third of this, so a worker that dies holding
    /// messages delays them by about this much.
    pub message_lease: Duration,
    /// The `mailroom` binary whose `render-sandbox` children render messages with a
    /// bounded address space; `None` renders in the worker's process. Not read from the
    /// environment: the CLI sets it to itself.
    pub render_program: Option<PathBuf>,
    /// The name the mailer gives in EHLO (`MAILROOM_SMTP_HELLO_NAME`). `None`: the
    /// machine's host name.
    pub smtp_hello_name: Option<String>,
    /// The nameserver every outbound lookup asks (`MAILROOM_DNS_SERVER`, an IP address
    /// with an optional port, 53 by default). `None`: those of `/etc/resolv.conf`.
    pub dns_server: Option<SocketAddr>,
    /// Test-only (`MAILROOM_SNS_TEST_ORIGIN`): an origin such as `http://127.0.0.1:4000`
    /// from which SNS signing certificates and subscription confirmations are fetched
    /// *instead of* `https://sns.<region>.amazonaws.com`. `None` (the default, and the
    /// only right value in production) accepts SNS hosts over HTTPS only.
    pub sns_test_origin: Option<String>,
    /// The operator's inbound mail host (`MAILROOM_INBOUND_HOST`): the target of the
    /// return-path MX (`bounces.<domain>`) each sending domain lists. `None` lists none.
    pub inbound_host: Option<String>,
    /// The inbound SMTP listener for bounces and complaints to VERP return paths
    /// (`MAILROOM_INBOUND_*`).
    pub inbound: InboundConfig,
    /// The most SMTP connections open to one mail server at once
    /// (`MAILROOM_SMTP_CONNECTIONS_PER_SERVER`).
    pub smtp_connections_per_server: usize,
    /// The most messages per second handed to one mail server
    /// (`MAILROOM_SMTP_RATE_LIMIT`); `None` is unlimited.
    pub smtp_rate_limit: Option<f64>,
    /// Whether `serve` also runs the background workers.
    pub run_workers: bool,
    /// Database pool size.
    pub db_pool_size: u32,
    /// How long one statement of an API request's transaction may run before PostgreSQL
    /// cancels it (`MAILROOM_STATEMENT_TIMEOUT`, seconds; `0` or `off`: no limit). The
    /// request then answers 503. Workers' transactions are not limited.
    pub statement_timeout: Option<Duration>,
    /// HTTP worker threads.
    pub http_workers: usize,
    /// Where `/metrics` and `/healthz` are served on a listener of their own
    /// (`MAILROOM_METRICS_LISTEN`): `mailroom worker` serves no other HTTP, and `serve`
    /// then answers 404 for `/metrics` on its public port. `None`: the worker serves no
    /// HTTP and `serve` exposes `/metrics` on `MAILROOM_LISTEN`.
    pub metrics_listen: Option<SocketAddr>,
    /// The per-token API rate limit (`MAILROOM_RATE_LIMIT_PER_SECOND`,
    /// `MAILROOM_RATE_LIMIT_BURST`); `None` turns it off.
    pub rate_limit: Option<RateLimit>,
    /// Failed authentications allowed per client address (`MAILROOM_AUTH_FAILURE_LIMIT`,
    /// per minute, also the burst); `None` turns the guard off.
    pub auth_failure_limit: Option<RateLimit>,
    /// Reverse proxies whose `X-Forwarded-For` names the client
    /// (`MAILROOM_TRUSTED_PROXIES`, comma-separated IP addresses).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// A directory whose files replace the public pages' compiled-in templates
    /// (`MAILROOM_PAGE_TEMPLATES`), read and checked at start.
    pub page_templates: Option<PathBuf>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact_url(&self.database_url))
            .field("listen", &self.listen)
            .field("public_url", &self.public_url)
            .field("unsubscribe_mailto", &self.unsubscribe_mailto)
            .field("secret_key", &"[redacted]")
            .field(
                "secret_key_previous",
                &self.secret_key_previous.map(|_| "[redacted]"),
            )
            .field("allow_private_egress", &self.allow_private_egress)
            .field("webhook_retry_schedule", &self.webhook_retry_schedule)
            .field("webhook_timeout", &self.webhook_timeout)
            .field("message_max_attempts", &self.message_max_attempts)
            .field("monthly_send_limit", &self.monthly_send_limit)
            .field("max_accounts_per_user", &self.max_accounts_per_user)
            .field("smtp_timeout", &self.smtp_timeout)
            .field("import_idle_timeout", &self.import_idle_timeout)
            .field("message_lease", &self.message_lease)
            .field("render_program", &self.render_program)
            .field("smtp_hello_name", &self.smtp_hello_name)
            .field("dns_server", &self.dns_server)
            .field("sns_test_origin", &self.sns_test_origin)
            .field("inbound_host", &self.inbound_host)
            .field("inbound", &self.inbound)
            .field(
                "smtp_connections_per_server",
                &self.smtp_connections_per_server,
            )
            .field("smtp_rate_limit", &self.smtp_rate_limit)
            .field("run_workers", &self.run_workers)
            .field("db_pool_size", &self.db_pool_size)
            .field("statement_timeout", &self.statement_timeout)
            .field("http_workers", &self.http_workers)
            .field("metrics_listen", &self.metrics_listen)
            .field("rate_limit", &self.rate_limit)
            .field("auth_failure_limit", &self.auth_failure_limit)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("page_templates", &self.page_templates)
            .finish()
    }
}

/// The inbound SMTP listener's settings (docs/operations.md, "Inbound SMTP").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundConfig {
    /// Where it listens (`MAILROOM_INBOUND_LISTEN`). `serve` starts it only when set;
    /// `mailroom inbound` listens on `0.0.0.0:25` when unset.
    pub listen: Option<SocketAddr>,
    /// The PEM certificate chain and key that `STARTTLS` presents
    /// (`MAILROOM_INBOUND_TLS_CERT`, `MAILROOM_INBOUND_TLS_KEY`); `None` offers no
    /// `STARTTLS`.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The largest message accepted, in bytes (`MAILROOM_INBOUND_MAX_MESSAGE_BYTES`, 1 KiB
    /// to 50 MiB; default 1 MiB).
    pub max_message_bytes: usize,
    /// Connections open at once (`MAILROOM_INBOUND_MAX_CONNECTIONS`, default 100).
    pub max_connections: usize,
    /// Connections open at once from one client address
    /// (`MAILROOM_INBOUND_MAX_CONNECTIONS_PER_IP`, default 10).
    pub max_connections_per_ip: usize,
    /// Messages accepted per client address per minute
    /// (`MAILROOM_INBOUND_MESSAGES_PER_MINUTE`, default 60).
    pub messages_per_minute: u32,
    /// The longest a session may wait for its commands in all (2 minutes; not read from
    /// the environment).
    pub idle_budget: Duration,
}

impl Default for InboundConfig {
    fn default() -> Self {
        Self {
            listen: None,
            tls: None,
            max_message_bytes: 1024 * 1024,
            max_connections: 100,
            max_connections_per_ip: 10,
            messages_per_minute: 60,
            idle_budget: Duration::from_secs(120),
        }
    }
}

impl InboundConfig {
    fn from_env() -> Result<Self> {
        let mut inbound = Self::default();
        if let Ok(listen) = std::env::var("MAILROOM_INBOUND_LISTEN") {
            inbound.listen = Some(listen.parse().with_context(|| {
                format!("MAILROOM_INBOUND_LISTEN must be host:port, got {listen:?}")
            })?);
        }
        let cert = std::env::var("MAILROOM_INBOUND_TLS_CERT")
            .ok()
            .filter(|v| !v.is_empty());
        let key = std::env::var("MAILROOM_INBOUND_TLS_KEY")
            .ok()
            .filter(|v| !v.is_empty());
        inbound.tls = match (cert, key) {
            (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
            (None, None) => None,
            _ => {
                return Err(anyhow!(
                    "MAILROOM_INBOUND_TLS_CERT and MAILROOM_INBOUND_TLS_KEY go together: set both or neither"
                ))
            }
        };
        let number = |name: &str, range: std::ops::RangeInclusive<u64>| -> Result<Option<u64>> {
            match std::env::var(name) {
                Ok(text) => text
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| range.contains(n))
                    .map(Some)
                    .ok_or_else(|| {
                        anyhow!(
                            "{name} must be a whole number from {} to {}",
                            range.start(),
                            range.end()
                        )
                    }),
                Err(_) => Ok(None),
            }
        };
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        if let Some(n) = number(
            "MAILROOM_INBOUND_MAX_MESSAGE_BYTES",
            1024..=50 * 1024 * 1024,
        )? {
            inbound.max_message_bytes = to_usize(n);
        }
        if let Some(n) = number("MAILROOM_INBOUND_MAX_CONNECTIONS", 1..=10_000)? {
            inbound.max_connections = to_usize(n);
        }
        if let Some(n) = number("MAILROOM_INBOUND_MAX_CONNECTIONS_PER_IP", 1..=10_000)? {
            inbound.max_connections_per_ip = to_usize(n);
        }
        if let Some(n) = number("MAILROOM_INBOUND_MESSAGES_PER_MINUTE", 1..=100_000)? {
            inbound.messages_per_minute = u32::try_from(n).unwrap_or(u32::MAX);
        }
        Ok(inbound)
    }
}

/// Hides a password in a connection URL.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl Config {
    /// A configuration with defaults for everything but the database and the key; used by
    /// tests and as the base of [`Config::from_env`].
    pub fn new(database_url: impl Into<String>, secret_key: [u8; 32]) -> Self {
        let listen: SocketAddr = ([127, 0, 0, 1], 8080).into();
        Self {
            database_url: database_url.into(),
            listen,
            public_url: format!("http://{listen}"),
            unsubscribe_mailto: None,
            secret_key,
            secret_key_previous: None,
            allow_private_egress: false,
            webhook_retry_schedule: DEFAULT_RETRY_SCHEDULE.to_vec(),
            webhook_timeout: DEFAULT_WEBHOOK_TIMEOUT,
            message_max_attempts: DEFAULT_MESSAGE_MAX_ATTEMPTS,
            monthly_send_limit: None,
            max_accounts_per_user: Some(DEFAULT_MAX_ACCOUNTS_PER_USER),
            smtp_timeout: DEFAULT_SMTP_TIMEOUT,
            import_idle_timeout: mailroom_http::DEFAULT_IMPORT_IDLE_TIMEOUT,
            message_lease: DEFAULT_MESSAGE_LEASE,
            render_program: None,
            smtp_hello_name: None,
            dns_server: None,
            sns_test_origin: None,
            inbound_host: None,
            inbound: InboundConfig::default(),
            smtp_connections_per_server: DEFAULT_SMTP_CONNECTIONS_PER_SERVER,
            smtp_rate_limit: None,
            run_workers: true,
            db_pool_size: 16,
            statement_timeout: Some(DEFAULT_STATEMENT_TIMEOUT),
            http_workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            metrics_listen: None,
            rate_limit: Some(RateLimit::DEFAULT),
            auth_failure_limit: Some(mailroom_http::auth_failures::DEFAULT_FAILURE_LIMIT),
            trusted_proxies: Vec::new(),
            page_templates: None,
        }
    }

    /// Reads the environment.
    ///
    /// # Errors
    /// When `DATABASE_URL` is missing or any variable holds an invalid value.
    pub fn from_env() -> Result<Self> {
        let database_url = std::env::var("DATABASE_URL").map_err(|_| {
            anyhow!("DATABASE_URL is not set (run `cargo xtask up`, or export a PostgreSQL URL)")
        })?;
        let secret_key = match std::env::var("MAILROOM_SECRET_KEY") {
            Ok(text) => parse_key(&text).context("MAILROOM_SECRET_KEY")?,
            Err(_) => load_or_create_key_file(Path::new(".mailroom/secret.key"))?,
        };
        let mut config = Self::new(database_url, secret_key);
        if let Ok(text) = std::env::var("MAILROOM_SECRET_KEY_PREVIOUS") {
            if !text.trim().is_empty() {
                config.secret_key_previous =
                    Some(parse_key(&text).context("MAILROOM_SECRET_KEY_PREVIOUS")?);
            }
        }
        if let Ok(listen) = std::env::var("MAILROOM_LISTEN") {
            config.listen = listen
                .parse()
                .with_context(|| format!("MAILROOM_LISTEN must be host:port, got {listen:?}"))?;
        }
        config.public_url = std::env::var("MAILROOM_PUBLIC_URL")
            .unwrap_or_else(|_| format!("http://{}", config.listen))
            .trim_end_matches('/')
            .to_owned();
        if let Ok(address) = std::env::var("MAILROOM_UNSUBSCRIBE_MAILTO") {
            config.unsubscribe_mailto = parse_mailto(&address)?;
        }
        config.allow_private_egress = env_bool("MAILROOM_ALLOW_PRIVATE_EGRESS", false)?;
        config.run_workers = env_bool("MAILROOM_WORKERS", true)?;
        if let Ok(schedule) = std::env::var("MAILROOM_WEBHOOK_RETRY_SCHEDULE") {
            config.webhook_retry_schedule =
                parse_schedule(&schedule).context("MAILROOM_WEBHOOK_RETRY_SCHEDULE")?;
        }
        if let Ok(attempts) = std::env::var("MAILROOM_MESSAGE_MAX_ATTEMPTS") {
            // At least 2: a message is never failed on its first transient error.
            config.message_max_attempts = attempts
                .trim()
                .parse()
                .ok()
                .filter(|n| *n >= 2)
                .ok_or_else(|| {
                    anyhow!("MAILROOM_MESSAGE_MAX_ATTEMPTS must be a whole number of at least 2")
                })?;
        }
        if let Ok(seconds) = std::env::var("MAILROOM_SMTP_TIMEOUT") {
            config.smtp_timeout = Duration::from_secs(
                seconds
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (1..=600).contains(n))
                    .ok_or_else(|| {
                        anyhow!("MAILROOM_SMTP_TIMEOUT must be whole seconds from 1 to 600")
                    })?,
            );
        }
        if let Ok(seconds) = std::env::var("MAILROOM_IMPORT_IDLE_TIMEOUT") {
            config.import_idle_timeout = Duration::from_secs(
                seconds
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (1..=600).contains(n))
                    .ok_or_else(|| {
                        anyhow!("MAILROOM_IMPORT_IDLE_TIMEOUT must be whole seconds from 1 to 600")
                    })?,
            );
        }
        if let Ok(seconds) = std::env::var("MAILROOM_MESSAGE_LEASE") {
            config.message_lease =
                parse_message_lease(&seconds).context("MAILROOM_MESSAGE_LEASE")?;
        }
        if let Ok(name) = std::env::var("MAILROOM_SMTP_HELLO_NAME") {
            config.smtp_hello_name =
                Some(parse_hello_name(&name).context("MAILROOM_SMTP_HELLO_NAME")?);
        }
        if let Ok(server) = std::env::var("MAILROOM_DNS_SERVER") {
            config.dns_server = Some(parse_dns_server(&server).context("MAILROOM_DNS_SERVER")?);
        }
        if let Ok(origin) = std::env::var("MAILROOM_SNS_TEST_ORIGIN") {
            config.sns_test_origin =
                Some(parse_origin(&origin).context("MAILROOM_SNS_TEST_ORIGIN")?);
        }
        if let Ok(host) = std::env::var("MAILROOM_INBOUND_HOST") {
            config.inbound_host = Some(
                parse_hello_name(&host)
                    .context("MAILROOM_INBOUND_HOST")?
                    .to_ascii_lowercase(),
            );
        }
        config.inbound = InboundConfig::from_env()?;
        if let Ok(limit) = std::env::var("MAILROOM_MONTHLY_SEND_LIMIT") {
            config.monthly_send_limit =
                parse_send_limit(&limit).context("MAILROOM_MONTHLY_SEND_LIMIT")?;
        }
        if let Ok(most) = std::env::var("MAILROOM_MAX_ACCOUNTS_PER_USER") {
            config.max_accounts_per_user =
                parse_accounts_per_user(&most).context("MAILROOM_MAX_ACCOUNTS_PER_USER")?;
        }
        if let Ok(connections) = std::env::var("MAILROOM_SMTP_CONNECTIONS_PER_SERVER") {
            config.smtp_connections_per_server = connections
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=1_000).contains(n))
                .ok_or_else(|| {
                    anyhow!(
                        "MAILROOM_SMTP_CONNECTIONS_PER_SERVER must be a whole number from 1 to 1000"
                    )
                })?;
        }
        if let Ok(rate) = std::env::var("MAILROOM_SMTP_RATE_LIMIT") {
            config.smtp_rate_limit = parse_rate(&rate).context("MAILROOM_SMTP_RATE_LIMIT")?;
        }
        if let Ok(size) = std::env::var("MAILROOM_DB_POOL_SIZE") {
            config.db_pool_size = size.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                anyhow!("MAILROOM_DB_POOL_SIZE must be a whole number of at least 1")
            })?;
        }
        if let Ok(limit) = std::env::var("MAILROOM_AUTH_FAILURE_LIMIT") {
            config.auth_failure_limit =
                parse_auth_failure_limit(&limit).context("MAILROOM_AUTH_FAILURE_LIMIT")?;
        }
        if let Ok(proxies) = std::env::var("MAILROOM_TRUSTED_PROXIES") {
            config.trusted_proxies =
                parse_trusted_proxies(&proxies).context("MAILROOM_TRUSTED_PROXIES")?;
        }
        if let Ok(directory) = std::env::var("MAILROOM_PAGE_TEMPLATES") {
            if !directory.trim().is_empty() {
                config.page_templates = Some(PathBuf::from(directory));
            }
        }
        if let Ok(timeout) = std::env::var("MAILROOM_STATEMENT_TIMEOUT") {
            config.statement_timeout =
                parse_statement_timeout(&timeout).context("MAILROOM_STATEMENT_TIMEOUT")?;
        }
        if let Ok(listen) = std::env::var("MAILROOM_METRICS_LISTEN") {
            config.metrics_listen = Some(listen.parse().with_context(|| {
                format!("MAILROOM_METRICS_LISTEN must be host:port, got {listen:?}")
            })?);
        }
        config.rate_limit = parse_rate_limit(
            std::env::var("MAILROOM_RATE_LIMIT_PER_SECOND")
                .ok()
                .as_deref(),
            std::env::var("MAILROOM_RATE_LIMIT_BURST").ok().as_deref(),
        )?;
        Ok(config)
    }
}

/// Failures per minute per address (also the burst), or `0`/`off` for no limit.
fn parse_auth_failure_limit(text: &str) -> Result<Option<RateLimit>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let per_minute: u32 = text.parse().map_err(|_| {
        anyhow!("must be a whole number of failures per minute, or 0/off, got {text:?}")
    })?;
    Ok((per_minute > 0).then(|| RateLimit {
        per_second: f64::from(per_minute) / 60.0,
        burst: per_minute,
    }))
}

/// Comma-separated IP addresses; blank is none.
fn parse_trusted_proxies(text: &str) -> Result<Vec<std::net::IpAddr>> {
    text.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            entry
                .parse()
                .map_err(|_| anyhow!("must be IP addresses separated by commas, got {entry:?}"))
        })
        .collect()
}

/// Whole seconds, or `0`/`off` for no limit.
fn parse_statement_timeout(text: &str) -> Result<Option<Duration>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let seconds: u64 = text.parse().map_err(|_| {
        anyhow!("must be a whole number of seconds, or 0/off for no limit, got {text:?}")
    })?;
    Ok((seconds > 0).then(|| Duration::from_secs(seconds)))
}

/// An email address for `List-Unsubscribe`'s `mailto:`; blank means none.
fn parse_mailto(text: &str) -> Result<Option<String>> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    mailroom_domain::email::EmailAddress::parse(text)
        .map(|address| Some(address.as_str().to_owned()))
        .map_err(|error| anyhow!("MAILROOM_UNSUBSCRIBE_MAILTO must be an email address: {error}"))
}

/// The rate limit from its two variables: a rate of `0` or `off` turns limiting off; the
/// burst defaults to twice the rate (at least 1).
fn parse_rate_limit(per_second: Option<&str>, burst: Option<&str>) -> Result<Option<RateLimit>> {
    let per_second = match per_second.map(str::trim) {
        None => RateLimit::DEFAULT.per_second,
        Some(text) if text.eq_ignore_ascii_case("off") => return Ok(None),
        Some(text) => text
            .parse::<f64>()
            .ok()
            .filter(|rate| rate.is_finite() && *rate >= 0.0)
            .ok_or_else(|| {
                anyhow!("MAILROOM_RATE_LIMIT_PER_SECOND must be a number of requests per second, or 0/off, got {text:?}")
            })?,
    };
    if per_second == 0.0 {
        return Ok(None);
    }
    let burst = match burst.map(str::trim) {
        None if per_second == RateLimit::DEFAULT.per_second => RateLimit::DEFAULT.burst,
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        None => (per_second * 2.0).ceil().clamp(1.0, f64::from(u32::MAX)) as u32,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|b| *b >= 1)
            .ok_or_else(|| {
                anyhow!(
                    "MAILROOM_RATE_LIMIT_BURST must be a whole number of at least 1, got {text:?}"
                )
            })?,
    };
    Ok(Some(RateLimit { per_second, burst }))
}

fn env_bool(name: &str, default: bool) -> Result<bool> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(value) => match value.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" | "" => Ok(false),
            other => bail!("{name} must be true or false, got {other:?}"),
        },
    }
}

/// `MAILROOM_DNS_SERVER`: `192.0.2.53`, `192.0.2.53:5353`, `2001:db8::53` or
/// `[2001:db8::53]:5353`. An address, not a name: resolving the resolver would need a
/// resolver.
fn parse_dns_server(text: &str) -> Result<SocketAddr> {
    let text = text.trim();
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    text.parse::<std::net::IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| {
            anyhow!("must be an IP address with an optional port, such as 10.0.0.2 or 10.0.0.2:53")
        })
}

/// The lease is renewed every third of itself while its worker lives, so it only has to
/// outlast a few renewal statements; the bounds keep it from renewing constantly (below
/// 5 s) or from leaving a dead worker's messages waiting for hours.
fn parse_message_lease(text: &str) -> Result<Duration> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|seconds| (5..=3600).contains(seconds))
        .map(Duration::from_secs)
        .ok_or_else(|| anyhow!("must be whole seconds from 5 to 3600, got {text:?}"))
}

/// An EHLO name is a domain (RFC 5321 §4.1.2): dot-separated labels of letters, digits and
/// inner hyphens, each at most 63 characters, at most 253 in all.
fn parse_hello_name(text: &str) -> Result<String> {
    let name = text.trim();
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        bail!("must be a host name such as mail.example.com, got {text:?}");
    }
    Ok(name.to_owned())
}

/// An origin, `http(s)://host[:port]`, without path, query or credentials.
fn parse_origin(text: &str) -> Result<String> {
    let text = text.trim().trim_end_matches('/');
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or_else(|| anyhow::anyhow!("must start with http:// or https://"))?;
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        anyhow::bail!("must be an origin (scheme, host and port only)");
    }
    Ok(text.to_ascii_lowercase())
}

/// Messages per second: a positive number (fractions allowed, e.g. `0.5`), or empty for
/// no limit.
fn parse_rate(text: &str) -> Result<Option<f64>> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let rate: f64 = text
        .parse()
        .ok()
        .filter(|rate: &f64| rate.is_finite() && *rate >= 0.001 && *rate <= 1_000_000.0)
        .ok_or_else(|| anyhow!("must be messages per second above 0, got {text:?}"))?;
    Ok(Some(rate))
}

fn parse_schedule(text: &str) -> Result<Vec<u64>> {
    let schedule: Vec<u64> = text
        .split(',')
        .map(|part| part.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow!("must be comma-separated whole seconds, got {text:?}"))?;
    if schedule.is_empty() {
        bail!("must hold at least one interval");
    }
    Ok(schedule)
}

/// A whole number of messages; an empty value is the same as unset (no limit), so a
/// deployment template can leave the variable blank.
fn parse_send_limit(text: &str) -> Result<Option<u64>> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| anyhow!("must be a whole number of messages, got {text:?}"))
}

/// A whole number of accounts, or `unlimited`. `0` is kept as it reads (no user may create
/// an account), not taken for "no bound": that has to be said in words. Blank is the
/// default, so a deployment template can leave the variable empty.
fn parse_accounts_per_user(text: &str) -> Result<Option<u64>> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Some(DEFAULT_MAX_ACCOUNTS_PER_USER));
    }
    if text.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| anyhow!("must be a whole number of accounts or `unlimited`, got {text:?}"))
}

/// Decodes a base64 key of exactly 32 bytes.
///
/// # Errors
/// When the text is not base64 of 32 bytes.
pub fn parse_key(text: &str) -> Result<[u8; 32]> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| anyhow!("must be base64"))?;
    bytes
        .try_into()
        .map_err(|bytes: Vec<u8>| anyhow!("must decode to 32 bytes, got {}", bytes.len()))
}

/// Reads the development key file, creating it (mode 0600) with a warning when absent.
fn load_or_create_key_file(path: &Path) -> Result<[u8; 32]> {
    if path.exists() {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        return parse_key(&text).with_context(|| format!("the key in {}", path.display()));
    }
    let mut key = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut key);
    let dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    writeln!(
        file,
        "{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )?;
    tracing::warn!(
        path = %path.display(),
        "MAILROOM_SECRET_KEY is not set: generated a development key; set the variable in production and keep the key safe, stored secrets cannot be read without it"
    );
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_auth_failure_limit_and_trusted_proxies() {
        let limit = parse_auth_failure_limit("60").expect("valid").expect("on");
        assert_eq!(limit.burst, 60);
        assert!((limit.per_second - 1.0).abs() < f64::EPSILON);
        assert_eq!(parse_auth_failure_limit("off").expect("valid"), None);
        assert_eq!(parse_auth_failure_limit("0").expect("valid"), None);
        assert!(parse_auth_failure_limit("many").is_err());
        assert_eq!(
            parse_trusted_proxies("10.0.0.1, ::1").expect("valid"),
            vec![
                "10.0.0.1".parse::<std::net::IpAddr>().expect("ip"),
                "::1".parse().expect("ip")
            ]
        );
        assert!(parse_trusted_proxies("10.0.0.0/8").is_err());
        assert!(parse_trusted_proxies(" ").expect("valid").is_empty());
    }

    #[test]
    fn the_sns_test_origin_must_be_a_bare_origin() {
        assert_eq!(
            parse_origin("http://127.0.0.1:4000/").expect("valid"),
            "http://127.0.0.1:4000"
        );
        assert!(parse_origin("127.0.0.1:4000").is_err());
        assert!(parse_origin("http://127.0.0.1:4000/certs").is_err());
        assert!(parse_origin("http://user@127.0.0.1").is_err());
        assert!(parse_origin("https://").is_err());
        assert_eq!(Config::new("postgres://x", [0; 32]).sns_test_origin, None);
    }

    #[test]
    fn parses_the_statement_timeout_default_15_seconds() {
        assert_eq!(
            Config::new("postgres://x", [0; 32]).statement_timeout,
            Some(Duration::from_secs(15))
        );
        assert_eq!(
            parse_statement_timeout(" 30 ").expect("valid"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(parse_statement_timeout("0").expect("valid"), None);
        assert_eq!(parse_statement_timeout("off").expect("valid"), None);
        assert!(parse_statement_timeout("1.5").is_err());
        assert!(parse_statement_timeout("-1").is_err());
    }

    #[test]
    fn parses_keys_schedules_and_redacts_urls() {
        let key = base64::engine::general_purpose::STANDARD.encode([5u8; 32]);
        assert_eq!(parse_key(&key).expect("valid"), [5u8; 32]);
        assert!(parse_key("short").is_err());
        assert_eq!(parse_schedule("5, 10,20").expect("valid"), vec![5, 10, 20]);
        assert!(parse_schedule("5,x").is_err());
        assert_eq!(parse_rate("").expect("valid"), None);
        assert_eq!(parse_rate(" 12.5 ").expect("valid"), Some(12.5));
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("-3").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("inf").is_err());
        assert_eq!(redact_url("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(parse_send_limit(" 3000 ").expect("valid"), Some(3000));
        assert_eq!(parse_send_limit("0").expect("valid"), Some(0));
        assert_eq!(parse_send_limit("").expect("valid"), None);
        assert!(parse_send_limit("-1").is_err());
        assert!(parse_send_limit("1e3").is_err());
        assert_eq!(parse_accounts_per_user(" 25 ").expect("valid"), Some(25));
        assert_eq!(parse_accounts_per_user("0").expect("valid"), Some(0));
        assert_eq!(parse_accounts_per_user("Unlimited").expect("valid"), None);
        assert_eq!(
            parse_accounts_per_user("").expect("blank"),
            Some(DEFAULT_MAX_ACCOUNTS_PER_USER)
        );
        assert!(parse_accounts_per_user("-1").is_err());
        assert!(parse_accounts_per_user("many").is_err());
        assert_eq!(
            parse_mailto(" unsubscribe@acme.example ").expect("valid"),
            Some("unsubscribe@acme.example".to_owned())
        );
        assert_eq!(parse_mailto("").expect("blank"), None);
        assert!(parse_mailto("not an address?subject=x").is_err());
    }

    #[test]
    fn rate_limit_defaults_on_and_turns_off() {
        assert_eq!(
            parse_rate_limit(None, None).expect("valid"),
            Some(RateLimit::DEFAULT)
        );
        assert_eq!(
            Config::new("x", [0; 32]).rate_limit,
            Some(RateLimit::DEFAULT)
        );
        assert_eq!(parse_rate_limit(Some("0"), Some("5")).expect("valid"), None);
        assert_eq!(parse_rate_limit(Some("OFF"), None).expect("valid"), None);
        assert_eq!(
            parse_rate_limit(Some("2.5"), None).expect("valid"),
            Some(RateLimit {
                per_second: 2.5,
                burst: 5
            })
        );
        assert_eq!(
            parse_rate_limit(Some("10"), Some("3")).expect("valid"),
            Some(RateLimit {
                per_second: 10.0,
                burst: 3
            })
        );
        assert!(parse_rate_limit(Some("-1"), None).is_err());
        assert!(parse_rate_limit(Some("fast"), None).is_err());
        assert!(parse_rate_limit(None, Some("0")).is_err());
    }

    #[test]
    fn the_dns_server_is_an_address_with_port_53_unless_given() {
        assert_eq!(
            parse_dns_server(" 10.0.0.2 ").unwrap(),
            "10.0.0.2:53".parse().unwrap()
        );
        assert_eq!(
            parse_dns_server("127.0.0.1:5353").unwrap(),
            "127.0.0.1:5353".parse().unwrap()
        );
        assert_eq!(
            parse_dns_server("2001:db8::53").unwrap(),
            "[2001:db8::53]:53".parse().unwrap()
        );
        assert_eq!(
            parse_dns_server("[::1]:5353").unwrap(),
            "[::1]:5353".parse().unwrap()
        );
        for bad in ["", "dns.example.com", "10.0.0.2:", "10.0.0.256"] {
            assert!(parse_dns_server(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_lease_is_whole_seconds_from_5_to_3600() {
        assert_eq!(
            parse_message_lease(" 7 ").expect("valid"),
            Duration::from_secs(7)
        );
        assert!(parse_message_lease("4").is_err());
        assert!(parse_message_lease("3601").is_err());
        assert!(parse_message_lease("-1").is_err());
        assert!(parse_message_lease("soon").is_err());
    }

    #[test]
    fn hello_names_are_host_names() {
        assert_eq!(
            parse_hello_name("mail-1.example.com").expect("valid"),
            "mail-1.example.com"
        );
        assert_eq!(parse_hello_name("worker-a").expect("valid"), "worker-a");
        for bad in [
            "",
            "-a.example",
            "a-.example",
            "a..b",
            "a b",
            "a\r\nMAIL",
            "é.example",
        ] {
            assert!(parse_hello_name(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_hello_name(&"a".repeat(64)).is_err());
    }
}
