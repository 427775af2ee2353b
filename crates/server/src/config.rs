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
    /// The bound on each step of an SMTP session (`MAILROOM_SMTP_TIMEOUT`, seconds).
    pub smtp_timeout: Duration,
    /// How long a claimed message stays leased to the worker sending it
    /// (`MAILROOM_MESSAGE_LEASE`, seconds). `None`: three SMTP timeouts plus 60 s.
    /// A worker that dies holding messages delays them by at most this much.
    pub message_lease: Option<Duration>,
    /// The name the mailer gives in EHLO (`MAILROOM_SMTP_HELLO_NAME`). `None`: the
    /// machine's host name.
    pub smtp_hello_name: Option<String>,
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
            .field("message_lease", &self.message_lease)
            .field("smtp_hello_name", &self.smtp_hello_name)
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
            message_lease: None,
            smtp_hello_name: None,
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
        if let Ok(seconds) = std::env::var("MAILROOM_MESSAGE_LEASE") {
            config.message_lease = Some(
                parse_message_lease(&seconds, config.smtp_timeout)
                    .context("MAILROOM_MESSAGE_LEASE")?,
            );
        }
        if let Ok(name) = std::env::var("MAILROOM_SMTP_HELLO_NAME") {
            config.smtp_hello_name =
                Some(parse_hello_name(&name).context("MAILROOM_SMTP_HELLO_NAME")?);
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

/// The lease must outlast a live session: resolution, connecting and the rest of the
/// session are each bounded by the SMTP timeout, so anything shorter than three of them
/// would let a second worker send a message the first is still sending.
fn parse_message_lease(text: &str, smtp_timeout: Duration) -> Result<Duration> {
    let lease = text
        .trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| anyhow!("must be whole seconds, got {text:?}"))?;
    if lease <= smtp_timeout * 3 {
        bail!(
            "must be more than three SMTP timeouts ({} s), got {} s",
            (smtp_timeout * 3).as_secs(),
            lease.as_secs()
        );
    }
    Ok(lease)
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
        assert_eq!(redact_url("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn a_lease_must_outlast_three_smtp_timeouts() {
        let timeout = Duration::from_secs(2);
        assert_eq!(
            parse_message_lease(" 7 ", timeout).expect("valid"),
            Duration::from_secs(7)
        );
        assert!(parse_message_lease("6", timeout).is_err());
        assert!(parse_message_lease("-1", timeout).is_err());
        assert!(parse_message_lease("soon", timeout).is_err());
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
