//! The inbound SMTP listener (`mailroom inbound`, or `serve` with
//! `MAILROOM_INBOUND_LISTEN`): receives bounces and complaints sent back to VERP
//! return-path addresses, and nothing else (docs/operations.md#inbound-smtp).
//!
//! A small state machine over tokio rather than an SMTP server crate: `mailin-embedded`
//! serves with blocking I/O on a thread pool (one thread per session, a fixed five-minute
//! timeout) and bounds neither size per address nor connections per address, so it
//! would add threads beside the runtime and still need most of the bounds below. What a
//! remote server controls is bounded here:
//!
//! - connections: [`InboundSettings::max_connections`] at once (a `421` beyond), and
//!   [`InboundSettings::max_connections_per_ip`] per client address;
//! - time: each command line within [`InboundSettings::command_timeout`], the whole
//!   `DATA` within [`InboundSettings::data_timeout`], the TLS handshake within the
//!   command timeout;
//! - size: a command line within [`MAX_COMMAND_LINE`] bytes, the message within
//!   [`InboundSettings::max_message_bytes`] (advertised as `SIZE`; beyond, `552` once the
//!   data ends), [`InboundSettings::max_recipients`] per message, and
//!   [`MAX_ERRORS`] refused or unknown commands per connection before a `421`;
//! - rate: [`InboundSettings::messages_per_ip_per_minute`] accepted messages per client
//!   address (`450` at `MAIL FROM` beyond), and [`RECIPIENT_RATE_FACTOR`] times as many
//!   `RCPT`s as those messages may carry ([`InboundSettings::max_recipients`] each) per
//!   client address (`450` beyond);
//! - database work: every `RCPT` counts, accepted or not: [`MAX_RECIPIENT_COMMANDS`] per
//!   session, and [`MAX_IDLE_COMMANDS`] commands that move no message forward (`RSET`,
//!   `NOOP`, `EHLO`, `HELO`, `VRFY`), before a `421`; a session looks each address up
//!   once (verified recipients are kept for the session), and the listener runs at most
//!   [`MAX_LOOKUPS_AT_ONCE`] lookups at once, so the pool it shares keeps connections for
//!   everyone else.
//!
//! `RCPT TO` is judged by [`return_path::check_recipient`] (no relaying: `550`); the
//! message by [`return_path::receive_report`], on the blocking pool, before the reply to
//! the end of `DATA`: `250` only once the report is recorded or deliberately dropped,
//! `451` when the store failed. Nothing here ever sends mail, so a bounce is never
//! answered with a bounce.

use std::{
    collections::HashMap,
    io,
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use mailroom_app::{
    return_path::{self, InboundOutcome, ReturnPathTarget},
    Services,
};
use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};
use tokio_rustls::{
    rustls::{
        self,
        pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    },
    TlsAcceptor,
};

/// The longest command line accepted, CRLF included (RFC 5321 asks for 512; paths with
/// long parameters get some room).
pub const MAX_COMMAND_LINE: usize = 2048;
/// The longest line inside `DATA` (RFC 5321: 1000); a longer one makes the message
/// refused as too large.
pub const MAX_DATA_LINE: usize = 64 * 1024;
/// Refused or unknown commands a connection may send before it is closed with `421`.
pub const MAX_ERRORS: u32 = 10;
/// Client addresses the rate limiter remembers at most; beyond, refilled ones are
/// forgotten first.
const MAX_TRACKED_CLIENTS: usize = 65_536;
/// `RCPT` commands one session may send, accepted or refused, before it is closed with
/// `421`: 20 messages of the most recipients each.
pub const MAX_RECIPIENT_COMMANDS: u32 = 100;
/// Commands that move no message forward (`RSET`, `NOOP`, `EHLO`, `HELO`, `VRFY`) one
/// session may send before it is closed with `421`.
pub const MAX_IDLE_COMMANDS: u32 = 50;
/// `RCPT`s a client address may send per minute, as a multiple of what its accepted
/// messages may carry (`messages_per_ip_per_minute` × `max_recipients`): room for
/// refused recipients and retried sessions, not for loops.
pub const RECIPIENT_RATE_FACTOR: f64 = 4.0;
/// Recipient lookups the listener runs at once, on the pool it shares with the API.
pub const MAX_LOOKUPS_AT_ONCE: usize = 4;
/// How long a `RCPT` waits for one of [`MAX_LOOKUPS_AT_ONCE`] before `451`.
const LOOKUP_WAIT: Duration = Duration::from_secs(10);

/// What the listener allows; the defaults are the documented ones
/// (docs/configuration.md).
#[derive(Clone)]
pub struct InboundSettings {
    /// The name in the greeting and the EHLO reply.
    pub hostname: String,
    /// The largest message accepted, in bytes (`SIZE`).
    pub max_message_bytes: usize,
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one client address.
    pub max_connections_per_ip: usize,
    /// Accepted messages per client address per minute.
    pub messages_per_ip_per_minute: u32,
    /// Recipients per message.
    pub max_recipients: usize,
    /// The longest wait for a command line (or a line inside `DATA`).
    pub command_timeout: Duration,
    /// The longest a whole `DATA` may take.
    pub data_timeout: Duration,
    /// The longest a session may spend waiting for its commands, all waits together: a
    /// client that sends `NOOP` just inside the command timeout holds its slot no longer.
    pub idle_budget: Duration,
    /// The certificate `STARTTLS` presents; `None` does not offer `STARTTLS`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Default for InboundSettings {
    fn default() -> Self {
        Self {
            hostname: "localhost".into(),
            max_message_bytes: 1024 * 1024,
            max_connections: 100,
            max_connections_per_ip: 10,
            messages_per_ip_per_minute: 60,
            max_recipients: 5,
            command_timeout: Duration::from_secs(60),
            data_timeout: Duration::from_secs(300),
            idle_budget: Duration::from_secs(120),
            tls: None,
        }
    }
}

impl std::fmt::Debug for InboundSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboundSettings")
            .field("hostname", &self.hostname)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_ip", &self.max_connections_per_ip)
            .field(
                "messages_per_ip_per_minute",
                &self.messages_per_ip_per_minute,
            )
            .field("max_recipients", &self.max_recipients)
            .field("command_timeout", &self.command_timeout)
            .field("data_timeout", &self.data_timeout)
            .field("idle_budget", &self.idle_budget)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// A rustls server configuration from PEM files: the certificate chain and its private
/// key (PKCS#8, PKCS#1 or SEC1).
///
/// # Errors
/// A description when a file cannot be read or holds no usable certificate or key.
pub fn tls_config_from_pem(
    cert_path: &std::path::Path,
    key_path: &std::path::Path,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs = CertificateDer::pem_file_iter(cert_path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|error| format!("{}: {error}", cert_path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate", cert_path.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|error| format!("{}: {error}", key_path.display()))?;
    tls_config(certs, key)
}

/// A rustls server configuration (ring, safe default protocol versions) for a
/// certificate chain and key.
///
/// # Errors
/// A description when the key does not fit the certificate.
pub fn tls_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, String> {
    rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map(Arc::new)
        .map_err(|error| error.to_string())
}

/// Called with the label of each counted event (an outcome of a message, a refusal by
/// reason); the server counts them in `mailroom_inbound_smtp_total`.
pub type InboundObserver = Arc<dyn Fn(&'static str) + Send + Sync>;

/// Every label [`InboundObserver`] is called with, so a metric can show them all from
/// the first scrape.
pub const LABELS: &[&str] = &[
    "recorded_bounce",
    "recorded_complaint",
    "repeated",
    "ignored",
    "dropped_not_a_report",
    "dropped_no_match",
    "deferred",
    "relay_refused",
    "unknown_domain",
    "bad_token",
    "unknown_message",
    "too_large",
    "too_many_recipients",
    "rate_limited",
    "too_many_connections",
    "protocol_error",
    "too_many_commands",
    "recipient_lookup",
];

struct Shared {
    settings: InboundSettings,
    services: Services,
    observer: InboundObserver,
    connections: Arc<Semaphore>,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    rates: Mutex<HashMap<IpAddr, Bucket>>,
    /// `RCPT`s per client address, as `rates` counts accepted messages.
    recipient_rates: Mutex<HashMap<IpAddr, Bucket>>,
    lookups: Semaphore,
}

/// A bound inbound listener; [`InboundListener::run`] serves it.
pub struct InboundListener {
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
}

impl InboundListener {
    /// Binds `address` (without a runtime: the process binds every port before it
    /// serves any).
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub fn bind(
        address: SocketAddr,
        settings: InboundSettings,
        services: Services,
        observer: InboundObserver,
    ) -> io::Result<Self> {
        let listener = std::net::TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            listener,
            shared: Arc::new(Shared {
                connections: Arc::new(Semaphore::new(settings.max_connections)),
                settings,
                services,
                observer,
                per_ip: Mutex::new(HashMap::new()),
                rates: Mutex::new(HashMap::new()),
                recipient_rates: Mutex::new(HashMap::new()),
                lookups: Semaphore::new(MAX_LOOKUPS_AT_ONCE),
            }),
        })
    }

    /// The bound address (its port when bound to port 0).
    ///
    /// # Errors
    /// When the socket has none.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections until the future is dropped; each runs on a task of its own.
    ///
    /// # Errors
    /// When the socket cannot join the runtime.
    pub async fn run(self) -> io::Result<()> {
        let listener = TcpListener::from_std(self.listener)?;
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(%error, "inbound SMTP accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let shared = self.shared.clone();
            tokio::spawn(async move { shared.connection(stream, peer.ip()).await });
        }
    }
}

impl Shared {
    async fn connection(self: Arc<Self>, mut stream: TcpStream, ip: IpAddr) {
        // One IPv6 /64 is one client: a host has the whole range to pick addresses from.
        let ip = client_key(ip);
        let Ok(_permit) = self.connections.clone().try_acquire_owned() else {
            self.refuse_connection(&mut stream).await;
            return;
        };
        let Some(_slot) = IpSlot::take(&self, ip) else {
            self.refuse_connection(&mut stream).await;
            return;
        };
        // The whole session, TLS included, has a deadline: the per-command time-out alone
        // lets a client that sends NOOP every minute, or never reads its replies (a write
        // blocked on a full socket), hold its slot for ever.
        let _ = tokio::time::timeout(SESSION_DEADLINE, self.sessions(stream, ip)).await;
    }

    /// The plaintext session and, after `STARTTLS`, the TLS one.
    async fn sessions(&self, stream: TcpStream, ip: IpAddr) {
        match self.session(stream, ip, false).await {
            Ok(Some(stream)) => {
                let Some(config) = self.settings.tls.clone() else {
                    return;
                };
                let accepted = tokio::time::timeout(
                    self.settings.command_timeout,
                    TlsAcceptor::from(config).accept(stream),
                )
                .await;
                if let Ok(Ok(tls)) = accepted {
                    if let Err(error) = self.session(tls, ip, true).await {
                        tracing::debug!(%error, "inbound SMTP session ended");
                    }
                }
            }
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "inbound SMTP session ended"),
        }
    }

    async fn refuse_connection(&self, stream: &mut TcpStream) {
        (self.observer)("too_many_connections");
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            stream.write_all(b"421 4.7.0 Too many connections, try again later\r\n"),
        )
        .await;
    }

    /// One SMTP session over `stream` until QUIT, EOF, a time-out or `STARTTLS`, which
    /// returns the stream with nothing buffered (anything the client pipelined after
    /// `STARTTLS` is dropped, so no plaintext command runs inside the TLS session).
    async fn session<S>(&self, stream: S, ip: IpAddr, tls: bool) -> io::Result<Option<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let settings = &self.settings;
        let mut conn = BufReader::new(stream);
        if !tls {
            reply(
                &mut conn,
                &format!("220 {} ESMTP Mailroom inbound", settings.hostname),
            )
            .await?;
        }
        let mut greeted = false;
        let mut sender: Option<String> = None;
        let mut targets: Vec<ReturnPathTarget> = Vec::new();
        let mut errors = 0u32;
        let mut recipient_commands = 0u32;
        let mut idle_commands = 0u32;
        // The recipients this session verified, by the path as written.
        let mut verified: HashMap<String, ReturnPathTarget> = HashMap::new();
        let mut idle = Duration::ZERO;
        let mut line = Vec::new();
        loop {
            if errors >= MAX_ERRORS {
                reply(&mut conn, "421 4.7.0 Too many errors, closing").await?;
                return Ok(None);
            }
            if recipient_commands > MAX_RECIPIENT_COMMANDS || idle_commands > MAX_IDLE_COMMANDS {
                (self.observer)("too_many_commands");
                reply(
                    &mut conn,
                    "421 4.7.0 Too many commands in one session, closing",
                )
                .await?;
                return Ok(None);
            }
            let left = settings.idle_budget.saturating_sub(idle);
            if left.is_zero() {
                (self.observer)("too_many_commands");
                reply(
                    &mut conn,
                    "421 4.4.2 Idle too long in this session, closing",
                )
                .await?;
                return Ok(None);
            }
            let waiting = Instant::now();
            let read = tokio::time::timeout(
                settings.command_timeout.min(left),
                read_line(&mut conn, MAX_COMMAND_LINE, &mut line),
            )
            .await;
            idle += waiting.elapsed();
            let read = match read {
                Err(_) if idle >= settings.idle_budget => {
                    (self.observer)("too_many_commands");
                    reply(
                        &mut conn,
                        "421 4.4.2 Idle too long in this session, closing",
                    )
                    .await?;
                    return Ok(None);
                }
                Err(_) => {
                    reply(&mut conn, "421 4.4.2 Idle too long, closing").await?;
                    return Ok(None);
                }
                Ok(read) => read?,
            };
            match read {
                LineRead::Eof => return Ok(None),
                LineRead::TooLong => {
                    errors += 1;
                    (self.observer)("protocol_error");
                    reply(&mut conn, "500 5.5.2 Line too long").await?;
                    continue;
                }
                LineRead::Line => {}
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\r', '\n']);
            let (verb, argument) = text.split_once(' ').unwrap_or((text, ""));
            let verb = verb.to_ascii_uppercase();
            let argument = argument.trim();
            match verb.as_str() {
                "RSET" | "NOOP" | "EHLO" | "HELO" | "VRFY" => idle_commands += 1,
                "RCPT" => recipient_commands += 1,
                _ => {}
            }
            if recipient_commands > MAX_RECIPIENT_COMMANDS || idle_commands > MAX_IDLE_COMMANDS {
                continue;
            }
            match verb.as_str() {
                "EHLO" | "HELO" if argument.is_empty() => {
                    errors += 1;
                    reply(&mut conn, "501 5.5.4 A domain or address is required").await?;
                }
                "EHLO" => {
                    greeted = true;
                    sender = None;
                    targets.clear();
                    let mut lines = vec![
                        settings.hostname.clone(),
                        format!("SIZE {}", settings.max_message_bytes),
                        "8BITMIME".into(),
                        "ENHANCEDSTATUSCODES".into(),
                    ];
                    if settings.tls.is_some() && !tls {
                        lines.push("STARTTLS".into());
                    }
                    let last = lines.len() - 1;
                    let text: String = lines
                        .iter()
                        .enumerate()
                        .map(|(i, l)| format!("250{}{l}\r\n", if i == last { ' ' } else { '-' }))
                        .collect();
                    write_raw(&mut conn, text.as_bytes()).await?;
                }
                "HELO" => {
                    greeted = true;
                    sender = None;
                    targets.clear();
                    reply(&mut conn, &format!("250 {}", settings.hostname)).await?;
                }
                "STARTTLS" if settings.tls.is_some() && !tls => {
                    reply(&mut conn, "220 2.0.0 Ready to start TLS").await?;
                    return Ok(Some(conn.into_inner()));
                }
                "MAIL" => {
                    if !greeted {
                        errors += 1;
                        reply(&mut conn, "503 5.5.1 Send EHLO first").await?;
                    } else if sender.is_some() {
                        errors += 1;
                        reply(&mut conn, "503 5.5.1 Nested MAIL command").await?;
                    } else if let Some((path, parameters)) = path_of(argument, "FROM:") {
                        if declared_size(parameters)
                            .is_some_and(|size| size > settings.max_message_bytes)
                        {
                            (self.observer)("too_large");
                            reply(&mut conn, "552 5.3.4 Message size exceeds the limit").await?;
                        } else if !self.may_send(ip) {
                            (self.observer)("rate_limited");
                            reply(
                                &mut conn,
                                "450 4.7.1 Too many messages from your address, try again later",
                            )
                            .await?;
                        } else {
                            sender = Some(path);
                            reply(&mut conn, "250 2.1.0 OK").await?;
                        }
                    } else {
                        errors += 1;
                        reply(&mut conn, "501 5.5.4 Syntax: MAIL FROM:<address>").await?;
                    }
                }
                "RCPT" => {
                    if sender.is_none() {
                        errors += 1;
                        reply(&mut conn, "503 5.5.1 Send MAIL first").await?;
                    } else if targets.len() >= settings.max_recipients {
                        (self.observer)("too_many_recipients");
                        reply(&mut conn, "452 4.5.3 Too many recipients").await?;
                    } else if !self.take_recipient(ip) {
                        (self.observer)("rate_limited");
                        reply(
                            &mut conn,
                            "450 4.7.1 Too many recipients from your address, try again later",
                        )
                        .await?;
                    } else if let Some((path, _)) = path_of(argument, "TO:") {
                        let checked = match verified.get(&path) {
                            Some(target) => Ok(Ok(Ok(*target))),
                            None => self.look_up(path.clone()).await,
                        };
                        match checked {
                            Ok(Ok(Ok(target))) => {
                                verified.insert(path, target);
                                targets.push(target);
                                reply(&mut conn, "250 2.1.5 OK").await?;
                            }
                            Ok(Ok(Err(refusal))) => {
                                errors += 1;
                                (self.observer)(refusal.label());
                                let text = match refusal {
                                    return_path::RecipientRefusal::Relay => {
                                        "550 5.7.1 Relaying denied"
                                    }
                                    _ => "550 5.1.1 No such return path",
                                };
                                reply(&mut conn, text).await?;
                            }
                            _ => {
                                (self.observer)("deferred");
                                reply(&mut conn, "451 4.3.0 Temporary failure, try again later")
                                    .await?;
                            }
                        }
                    } else {
                        errors += 1;
                        reply(&mut conn, "501 5.5.4 Syntax: RCPT TO:<address>").await?;
                    }
                }
                "DATA" => {
                    if sender.is_none() || targets.is_empty() {
                        errors += 1;
                        reply(&mut conn, "503 5.5.1 No valid recipients").await?;
                        continue;
                    }
                    reply(&mut conn, "354 End data with <CR><LF>.<CR><LF>").await?;
                    let data = tokio::time::timeout(
                        settings.data_timeout,
                        read_data(
                            &mut conn,
                            settings.max_message_bytes,
                            settings.command_timeout,
                        ),
                    )
                    .await;
                    let data = match data {
                        Err(_) | Ok(Err(_)) => {
                            let _ = reply(&mut conn, "421 4.4.2 Data took too long, closing").await;
                            return Ok(None);
                        }
                        Ok(Ok(data)) => data,
                    };
                    sender = None;
                    let targets = std::mem::take(&mut targets);
                    let Some(data) = data else {
                        (self.observer)("too_large");
                        reply(&mut conn, "552 5.3.4 Message size exceeds the limit").await?;
                        continue;
                    };
                    let outcomes = self.receive(targets, data).await;
                    if outcomes.contains(&InboundOutcome::Deferred) {
                        reply(&mut conn, "451 4.3.0 Temporary failure, try again later").await?;
                    } else {
                        self.sent(ip);
                        reply(&mut conn, "250 2.0.0 OK").await?;
                    }
                }
                "RSET" => {
                    sender = None;
                    targets.clear();
                    reply(&mut conn, "250 2.0.0 OK").await?;
                }
                "NOOP" => reply(&mut conn, "250 2.0.0 OK").await?,
                "VRFY" => reply(&mut conn, "252 2.1.5 Cannot verify").await?,
                "QUIT" => {
                    reply(&mut conn, "221 2.0.0 Bye").await?;
                    return Ok(None);
                }
                _ => {
                    errors += 1;
                    (self.observer)("protocol_error");
                    reply(&mut conn, "502 5.5.2 Command not implemented").await?;
                }
            }
        }
    }

    /// Records the message for each recipient on the blocking pool and counts each
    /// outcome.
    async fn receive(&self, targets: Vec<ReturnPathTarget>, data: Vec<u8>) -> Vec<InboundOutcome> {
        let services = self.services.clone();
        let outcomes = tokio::task::spawn_blocking(move || {
            targets
                .into_iter()
                .map(|target| return_path::receive_report(&services, target, &data))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_else(|_| vec![InboundOutcome::Deferred]);
        for outcome in &outcomes {
            (self.observer)(outcome.label());
        }
        outcomes
    }

    /// Looks a recipient up, one of at most [`MAX_LOOKUPS_AT_ONCE`]; an `Err` when no
    /// lookup could run in time or its task failed.
    async fn look_up(
        &self,
        path: String,
    ) -> Result<
        Result<Result<ReturnPathTarget, return_path::RecipientRefusal>, mailroom_app::AppError>,
        (),
    > {
        let Ok(Ok(_permit)) = tokio::time::timeout(LOOKUP_WAIT, self.lookups.acquire()).await
        else {
            return Err(());
        };
        (self.observer)("recipient_lookup");
        let services = self.services.clone();
        tokio::task::spawn_blocking(move || return_path::check_recipient(&services, &path))
            .await
            .map_err(|_| ())
    }

    /// Takes one `RCPT` from `ip`'s bucket; `false` when it is empty.
    fn take_recipient(&self, ip: IpAddr) -> bool {
        let capacity = f64::from(self.settings.messages_per_ip_per_minute)
            * self.settings.max_recipients as f64
            * RECIPIENT_RATE_FACTOR;
        let mut rates = self
            .recipient_rates
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if rates.len() >= MAX_TRACKED_CLIENTS {
            rates.retain(|_, bucket| {
                bucket.refill(capacity);
                bucket.tokens < capacity
            });
        }
        let bucket = rates.entry(ip).or_insert(Bucket {
            tokens: capacity,
            at: Instant::now(),
        });
        bucket.refill(capacity);
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        true
    }

    /// Whether `ip` has a message left in its bucket (taken by [`Shared::sent`]).
    fn may_send(&self, ip: IpAddr) -> bool {
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let capacity = f64::from(self.settings.messages_per_ip_per_minute);
        // A client without a bucket has a full one: only `sent` makes entries, so clients
        // that never get a message accepted (fresh IPv6 addresses, say) grow nothing.
        rates.get_mut(&ip).is_none_or(|bucket| {
            bucket.refill(capacity);
            bucket.tokens >= 1.0
        })
    }

    fn sent(&self, ip: IpAddr) {
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let capacity = f64::from(self.settings.messages_per_ip_per_minute);
        if rates.len() >= MAX_TRACKED_CLIENTS {
            rates.retain(|_, bucket| {
                bucket.refill(capacity);
                bucket.tokens < capacity
            });
        }
        let bucket = rates.entry(ip).or_insert(Bucket {
            tokens: capacity,
            at: Instant::now(),
        });
        bucket.refill(capacity);
        bucket.tokens = (bucket.tokens - 1.0).max(0.0);
    }
}

/// How long one connection may last, whatever it does: long enough for a few reports
/// at the slowest allowed pace (a `DATA` may take 5 minutes), short enough that slots
/// come back.
const SESSION_DEADLINE: Duration = Duration::from_secs(10 * 60);

/// The key a client is counted under: its IPv4 address, or its IPv6 /64.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

/// A token bucket of accepted messages: `capacity` per minute, refilled continuously.
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self, capacity: f64) {
        let now = Instant::now();
        let elapsed = now.duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * capacity / 60.0).min(capacity);
        self.at = now;
    }
}

/// One of a client address's connection slots, given back on drop.
struct IpSlot<'s> {
    shared: &'s Shared,
    ip: IpAddr,
}

impl<'s> IpSlot<'s> {
    fn take(shared: &'s Shared, ip: IpAddr) -> Option<Self> {
        let mut per_ip = shared.per_ip.lock().unwrap_or_else(|e| e.into_inner());
        let open = per_ip.entry(ip).or_insert(0);
        if *open >= shared.settings.max_connections_per_ip {
            return None;
        }
        *open += 1;
        Some(Self { shared, ip })
    }
}

impl Drop for IpSlot<'_> {
    fn drop(&mut self) {
        let mut per_ip = self.shared.per_ip.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = per_ip.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

async fn reply<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut BufReader<S>,
    text: &str,
) -> io::Result<()> {
    write_raw(conn, format!("{text}\r\n").as_bytes()).await
}

async fn write_raw<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut BufReader<S>,
    bytes: &[u8],
) -> io::Result<()> {
    let stream = conn.get_mut();
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// The address inside `<…>` after `keyword` (case-insensitive, spaces allowed after the
/// colon), and the parameters after it. The null path `<>` gives an empty address.
fn path_of<'a>(argument: &'a str, keyword: &str) -> Option<(String, &'a str)> {
    let head = argument.get(..keyword.len())?;
    if !head.eq_ignore_ascii_case(keyword) {
        return None;
    }
    let rest = argument[keyword.len()..].trim_start();
    let rest = rest.strip_prefix('<')?;
    let (path, parameters) = rest.split_once('>')?;
    // A source route (`@a,@b:user@host`) is allowed by RFC 5321 and ignored.
    let path = path.rsplit_once(':').map_or(path, |(_, address)| address);
    Some((path.to_owned(), parameters.trim()))
}

/// The `SIZE=` parameter of `MAIL FROM`, if any.
fn declared_size(parameters: &str) -> Option<usize> {
    parameters.split_whitespace().find_map(|parameter| {
        let (name, value) = parameter.split_once('=')?;
        name.eq_ignore_ascii_case("SIZE")
            .then(|| value.parse().ok())
            .flatten()
    })
}

#[derive(Debug, PartialEq, Eq)]
enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Reads one line (through `\n`) into `line`, at most `max` bytes: a longer line is
/// consumed to its end and reported as [`LineRead::TooLong`] with `line` empty.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    line: &mut Vec<u8>,
) -> io::Result<LineRead> {
    line.clear();
    let mut too_long = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(LineRead::Eof);
        }
        let (taken, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buffer.len(), false),
        };
        if !too_long && line.len() + taken <= max {
            line.extend_from_slice(&buffer[..taken]);
        } else {
            too_long = true;
            line.clear();
        }
        reader.consume(taken);
        if done {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

/// Reads `DATA` to its final `.` line, dot-unstuffed: `Some(message)` within `max`
/// bytes, `None` when it was larger (read to its end all the same, so the session can
/// go on with a `552`). Each line must come within `line_timeout`.
async fn read_data<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    line_timeout: Duration,
) -> io::Result<Option<Vec<u8>>> {
    let mut message = Vec::new();
    let mut oversized = false;
    let mut line = Vec::new();
    loop {
        let read = tokio::time::timeout(line_timeout, read_line(reader, MAX_DATA_LINE, &mut line))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "data line timed out"))??;
        match read {
            LineRead::Eof => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed inside DATA",
                ))
            }
            LineRead::TooLong => {
                oversized = true;
                continue;
            }
            LineRead::Line => {}
        }
        if line == b".\r\n" || line == b".\n" {
            return Ok((!oversized).then_some(message));
        }
        let content = line.strip_prefix(b".").unwrap_or(&line);
        if message.len() + content.len() > max {
            oversized = true;
            message = Vec::new();
        }
        if !oversized {
            message.extend_from_slice(content);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_are_counted_by_their_64_and_mapped_ipv4_as_ipv4() {
        let key = |text: &str| client_key(text.parse().expect("address"));
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:bbbb::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
    }

    #[test]
    fn paths_and_sizes_are_read_from_mail_and_rcpt() {
        assert_eq!(
            path_of("FROM:<a@b.example> SIZE=100", "FROM:"),
            Some(("a@b.example".into(), "SIZE=100"))
        );
        assert_eq!(path_of("from: <>", "FROM:"), Some((String::new(), "")));
        assert_eq!(
            path_of("TO:<@relay.example:x@y.example>", "TO:"),
            Some(("x@y.example".into(), ""))
        );
        assert_eq!(path_of("TO:x@y.example", "TO:"), None);
        assert_eq!(path_of("FROM", "FROM:"), None);
        assert_eq!(declared_size("BODY=8BITMIME size=2048"), Some(2048));
        assert_eq!(declared_size("SIZE=lots"), None);
    }

    #[tokio::test]
    async fn long_lines_are_consumed_and_reported() {
        let input = format!("{}\r\nNOOP\r\n", "x".repeat(5000));
        let mut reader = BufReader::with_capacity(64, input.as_bytes());
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut reader, 100, &mut line).await.unwrap(),
            LineRead::TooLong
        );
        assert_eq!(
            read_line(&mut reader, 100, &mut line).await.unwrap(),
            LineRead::Line
        );
        assert_eq!(line, b"NOOP\r\n");
        assert_eq!(
            read_line(&mut reader, 100, &mut line).await.unwrap(),
            LineRead::Eof
        );
    }

    #[tokio::test]
    async fn data_is_unstuffed_and_bounded() {
        let input = b"Subject: x\r\n\r\n..dot\r\nend\r\n.\r\nNEXT\r\n";
        let mut reader = BufReader::new(&input[..]);
        let data = read_data(&mut reader, 1000, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(
            data.as_deref(),
            Some(&b"Subject: x\r\n\r\n.dot\r\nend\r\n"[..])
        );
        let mut line = Vec::new();
        read_line(&mut reader, 100, &mut line).await.unwrap();
        assert_eq!(line, b"NEXT\r\n", "the rest of the session is left");

        let big = format!("{}\r\n.\r\n", "y".repeat(500));
        let mut reader = BufReader::new(big.as_bytes());
        assert_eq!(
            read_data(&mut reader, 100, Duration::from_secs(1))
                .await
                .unwrap(),
            None
        );
    }
}
