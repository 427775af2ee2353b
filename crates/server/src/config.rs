//! Operator configuration, read from the environment once at start-up (DESIGN.md §3).
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

/// The default webhook retry schedule, in seconds between attempts.
pub const DEFAULT_RETRY_SCHEDULE: [u64; 7] = [5, 300, 1800, 7200, 18000, 36000, 36000];

/// The total time one webhook delivery attempt may take (DESIGN.md §10).
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(15);

/// Attempts a message gets before a transient SMTP failure makes it `failed`.
pub const DEFAULT_MESSAGE_MAX_ATTEMPTS: u32 = 8;

/// The bound on each step of one SMTP session (connect, then the rest).
pub const DEFAULT_SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// SMTP connections open to one mail server at once, unless configured.
pub const DEFAULT_SMTP_CONNECTIONS_PER_SERVER: usize = 8;

/// Everything the process is configured with.
#[derive(Clone)]
pub struct Config {
    /// PostgreSQL connection URL.
    pub database_url: String,
    /// Where the HTTP API listens.
    pub listen: SocketAddr,
    /// Base URL for links in mail (tracking, unsubscribe).
    pub public_url: String,
    /// 32-byte key that seals stored secrets.
    pub secret_key: [u8; 32],
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
    /// The bound on each step of an SMTP session. Not an environment variable; tests
    /// shorten it.
    pub smtp_timeout: Duration,
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
    /// HTTP worker threads.
    pub http_workers: usize,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact_url(&self.database_url))
            .field("listen", &self.listen)
            .field("public_url", &self.public_url)
            .field("secret_key", &"[redacted]")
            .field("allow_private_egress", &self.allow_private_egress)
            .field("webhook_retry_schedule", &self.webhook_retry_schedule)
            .field("webhook_timeout", &self.webhook_timeout)
            .field("message_max_attempts", &self.message_max_attempts)
            .field("smtp_timeout", &self.smtp_timeout)
            .field(
                "smtp_connections_per_server",
                &self.smtp_connections_per_server,
            )
            .field("smtp_rate_limit", &self.smtp_rate_limit)
            .field("run_workers", &self.run_workers)
            .field("db_pool_size", &self.db_pool_size)
            .field("http_workers", &self.http_workers)
            .finish()
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
            secret_key,
            allow_private_egress: false,
            webhook_retry_schedule: DEFAULT_RETRY_SCHEDULE.to_vec(),
            webhook_timeout: DEFAULT_WEBHOOK_TIMEOUT,
            message_max_attempts: DEFAULT_MESSAGE_MAX_ATTEMPTS,
            smtp_timeout: DEFAULT_SMTP_TIMEOUT,
            smtp_connections_per_server: DEFAULT_SMTP_CONNECTIONS_PER_SERVER,
            smtp_rate_limit: None,
            run_workers: true,
            db_pool_size: 16,
            http_workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
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
        if let Ok(listen) = std::env::var("MAILROOM_LISTEN") {
            config.listen = listen
                .parse()
                .with_context(|| format!("MAILROOM_LISTEN must be host:port, got {listen:?}"))?;
        }
        config.public_url = std::env::var("MAILROOM_PUBLIC_URL")
            .unwrap_or_else(|_| format!("http://{}", config.listen))
            .trim_end_matches('/')
            .to_owned();
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
        Ok(config)
    }
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
    }
}
