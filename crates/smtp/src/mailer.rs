//! The `Mailer` port over lettre's async SMTP client, on connections Mailroom dials itself
//! and keeps in a pool per mail server.
//!
//! A new connection: resolve once through the egress guard, dial the checked address
//! (with `TCP_NODELAY`), secure it as the server's mode says (implicit TLS here, STARTTLS
//! through lettre), authenticate when AUTH is advertised. Then each message is one mail
//! transaction on a pooled connection (see [`crate::pool`]): `MAIL FROM`, `RCPT TO`,
//! `DATA`. A transaction refused before `DATA` is reset (`RSET`) and the connection kept.
//!
//! # Pipelining
//! When the server offers `PIPELINING` (RFC 2920), the envelope (`MAIL FROM`, every
//! `RCPT TO`, `DATA`) goes in one write and its replies are read in order, so a message
//! costs two round trips instead of three plus one per recipient (docs/operations.md,
//! "Delivery engine"). lettre keeps only the EHLO keywords
//! it acts on, and `PIPELINING` is not one of them, so a new connection asks EHLO once
//! more before AUTH and reads the keyword itself. The content then goes with its final
//! dot in one write ([`Content`]). Every reply is still read and blamed on its own
//! command; a refusal before the content leaves no command unanswered, and when `DATA` is
//! accepted although the contact was refused, the connection is closed rather than the
//! content sent. An envelope of more than [`PIPELINED_RECIPIENTS`] recipients goes one
//! command at a time: a template's copies are the tenant's to set, and one write of
//! thousands of commands, with all their replies read as one (past the 64 KiB bound on
//! what is read between writes, [`crate::bounded`]), is not something to build per message.
//!
//! # Blame
//! Every reply is reported with the step it answered ([`SmtpStage`]): the session
//! (greeting, EHLO, STARTTLS), AUTH, `MAIL FROM`, the contact's own `RCPT TO`, a copy's
//! `RCPT TO`, or `DATA`; the domain decides who is at fault
//! ([`AttemptFault::classify`]). A refused Cc or Bcc does not end the transaction: the
//! message goes to the others and the refusal comes back in
//! [`MailAccepted::refused_copies`]. A login the server refused is remembered by the
//! pool of those settings for a while, so the messages behind it do not each try again.
//!
//! # Never twice
//! A pooled connection the server closed while it was idle fails at `MAIL FROM`: the
//! message is then sent once more on a fresh connection, because the server cannot have
//! taken it. Once `DATA` was sent, a lost connection is reported as it is (the worker
//! retries later, with backoff): resending at once is how duplicates happen.

use std::error::Error as _;
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lettre::address::Envelope;
use lettre::message::{
    header::{ContentType, HeaderName, HeaderValue},
    Mailbox, Mailboxes, MultiPart, SinglePart,
};
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::commands::{Data, Ehlo, Mail, Rcpt, Rset};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use lettre::transport::smtp::response::Response;
use lettre::transport::smtp::Error as SmtpError;
use lettre::{Address, Message};

use crate::dkim::SplitBody;
use mailroom_app::ports::{
    MailAccepted, MailFuture, Mailer, OutgoingMail, ProbeError, SmtpEndpoint, SmtpSecurity,
};
use mailroom_app::rendering;
use mailroom_dns::DnsResolver;
use mailroom_domain::message::{AttemptFault, ReplyClass, SmtpReply, SmtpStage};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::bounded::bounded;
use crate::implicit_tls::ImplicitTlsStream;
use crate::pool::{close_all, Pooled, Pools, ServerPool, SmtpPoolSettings};
use crate::resolve::resolve_pinned_async;

/// The mechanisms Mailroom speaks, in order of preference.
const MECHANISMS: [Mechanism; 2] = [Mechanism::Plain, Mechanism::Login];

/// The most recipients an envelope may have to go pipelined (RFC 5321 §4.5.3.1.8: a
/// server must take at least 100). Their commands are a few KiB and their replies stay
/// far under the bound on what is read between two writes.
const PIPELINED_RECIPIENTS: usize = 100;

/// How long `RSET` after a refused transaction may take before the connection is dropped.
const RSET_TIMEOUT: Duration = Duration::from_secs(5);

/// Operator settings of [`SmtpMailer`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MailerSettings {
    /// Let connections reach private and loopback addresses
    /// (`MAILROOM_ALLOW_PRIVATE_EGRESS`). Off in production; tests on loopback need it.
    pub allow_private_egress: bool,
    /// Bound on resolution, on connecting (with TLS, EHLO and AUTH), and on each mail
    /// transaction.
    pub timeout: Duration,
    /// Connections per server, pace and connection lifetimes.
    pub pool: SmtpPoolSettings,
}

/// Sends messages over pooled connections to the pinned address of their server.
#[derive(Clone)]
pub struct SmtpMailer {
    settings: MailerSettings,
    pools: Arc<Pools>,
    /// The name given in EHLO: the machine's host name unless the operator set one.
    client_id: ClientId,
    /// Resolves every new connection's host once, through the egress guard.
    resolver: DnsResolver,
}

impl std::fmt::Debug for SmtpMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpMailer")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Where a transaction stopped, for deciding whether the message may go again and
/// whether the transaction needs `RSET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Before the `DATA` command: the server cannot have taken the message.
    Envelope,
    /// `DATA`'s reply is awaited (every earlier reply was read), the content not yet
    /// sent: never resent at once from here on (the duplicate window), but a refused
    /// `DATA` leaves the transaction open.
    Data,
    /// The content was sent: its reply, if any, ends the transaction.
    Content,
}

/// A transaction that did not end in acceptance.
struct Refusal {
    fault: AttemptFault,
    stage: Stage,
    /// The connection answered and can take the next transaction (after `RSET` when the
    /// refusal came before the content).
    alive: bool,
}

impl SmtpMailer {
    /// A mailer with these settings and empty pools that introduces itself (EHLO) by the
    /// machine's host name, as lettre does by default.
    pub fn new(settings: MailerSettings) -> Self {
        Self::with_client_id(settings, ClientId::default())
    }

    /// A mailer that introduces itself in EHLO as `hello_name` (`MAILROOM_SMTP_HELLO_NAME`):
    /// receiving servers check that name against the sending address's reverse DNS, and a
    /// container's host name is rarely a public one. The caller validates the name.
    pub fn with_hello_name(settings: MailerSettings, hello_name: String) -> Self {
        Self::with_client_id(settings, ClientId::Domain(hello_name))
    }

    fn with_client_id(settings: MailerSettings, client_id: ClientId) -> Self {
        Self {
            settings,
            pools: Pools::new(settings.pool),
            client_id,
            resolver: DnsResolver::process_default(),
        }
    }

    /// The same mailer resolving hosts with `resolver` (the server's shared one) instead
    /// of the process default.
    #[must_use]
    pub fn with_resolver(mut self, resolver: DnsResolver) -> Self {
        self.resolver = resolver;
        self
    }

    async fn deliver(&self, mail: &OutgoingMail) -> Result<MailAccepted, AttemptFault> {
        let (envelope, bytes) = build_message(mail)?;
        let contact = mailbox(&mail.rendered.to, "to")?.email;
        let server = self.pools.server(&mail.endpoint);
        let settings = self.pools.settings();
        // The semaphore is never closed; a failure here would be a bug, not the network.
        let _permit = server
            .permits
            .acquire()
            .await
            .map_err(|error| AttemptFault::Connection(format!("connection pool: {error}")))?;
        server.pace(settings).await;
        let mut reused = server.checkout(settings);
        loop {
            let was_reused = reused.is_some();
            let mut pooled = match reused.take() {
                Some(pooled) => pooled,
                None => self.open(&server, &mail.endpoint).await?,
            };
            match self
                .transact(&mut pooled, &envelope, &contact, &bytes)
                .await
            {
                Ok(accepted) => {
                    server.checkin(pooled, settings);
                    return Ok(accepted);
                }
                Err(refusal) => {
                    let retry = was_reused && refusal.stage == Stage::Envelope && !refusal.alive;
                    self.release(&server, pooled, &refusal).await;
                    if retry {
                        tracing::debug!(
                            fault = %refusal.fault,
                            "a pooled SMTP connection was gone; sending on a fresh one"
                        );
                        continue;
                    }
                    return Err(refusal.fault);
                }
            }
        }
    }

    /// After a refusal: keeps a connection that still answers (resetting an unfinished
    /// transaction), closes the others.
    async fn release(&self, server: &ServerPool, mut pooled: Pooled, refusal: &Refusal) {
        let settings = self.pools.settings();
        if !refusal.alive {
            close_all(vec![pooled]);
            return;
        }
        if refusal.stage == Stage::Content {
            // The final dot was answered: the transaction is over, nothing to reset.
            server.checkin(pooled, settings);
            return;
        }
        match timeout(RSET_TIMEOUT, pooled.connection.command(Rset)).await {
            Ok(Ok(_)) => server.checkin(pooled, settings),
            _ => close_all(vec![pooled]),
        }
    }

    /// A new connection for `server`'s pool, unless the server refused these settings'
    /// login a moment ago: then that refusal again, without another login attempt.
    async fn open(
        &self,
        server: &ServerPool,
        endpoint: &SmtpEndpoint,
    ) -> Result<Pooled, AttemptFault> {
        if let Some(refusal) = server.recent_refusal() {
            return Err(refusal);
        }
        match self.connect(endpoint).await {
            Ok(session) => {
                server.forget_refusal();
                Ok(session)
            }
            Err(fault) => {
                if fault.classify() == ReplyClass::ServerFault {
                    server.remember_refusal(fault.clone());
                }
                Err(fault)
            }
        }
    }

    /// A new connection: resolved through the egress guard, dialled, secured,
    /// greeted, asked whether it pipelines, and authenticated.
    async fn connect(&self, endpoint: &SmtpEndpoint) -> Result<Pooled, AttemptFault> {
        let settings = self.settings;
        let address = resolve_pinned_async(
            &self.resolver,
            &endpoint.host,
            endpoint.port,
            settings.allow_private_egress,
        )
        .await
        .map_err(|error| match error {
            // The operator's policy, not the network: retrying gives the same answer.
            ProbeError::EgressRefused(_) => AttemptFault::Permanent(error.to_string()),
            other => AttemptFault::Connection(other.to_string()),
        })?;
        let client_id = &self.client_id;
        let mut connection = timeout(self.settings.timeout, async {
            let stream = TcpStream::connect(address)
                .await
                .map_err(|error| AttemptFault::Connection(format!("{address}: {error}")))?;
            // A transaction is several small writes (the envelope, then the content); with
            // Nagle on, the receiver's delayed ACK stalls every message by about 40 ms.
            stream
                .set_nodelay(true)
                .map_err(|error| AttemptFault::Connection(error.to_string()))?;
            let connection = match endpoint.security {
                SmtpSecurity::ImplicitTls => {
                    let tls = ImplicitTlsStream::handshake(
                        stream,
                        tls_host(endpoint),
                        endpoint.allow_insecure_tls,
                    )
                    .await
                    .map_err(|error| AttemptFault::Connection(format!("TLS: {error}")))?;
                    AsyncSmtpConnection::connect_with_transport(bounded(tls), client_id)
                        .await
                        .map_err(|error| fault(&error, SmtpStage::Session))?
                }
                SmtpSecurity::StartTlsRequired | SmtpSecurity::StartTlsOpportunistic => {
                    let mut connection =
                        AsyncSmtpConnection::connect_with_transport(bounded(stream), client_id)
                            .await
                            .map_err(|error| fault(&error, SmtpStage::Session))?;
                    let offers = connection.can_starttls();
                    let upgrade = match endpoint.security {
                        SmtpSecurity::StartTlsRequired if !offers => {
                            return Err(AttemptFault::Connection(
                                "the server does not offer STARTTLS".into(),
                            ));
                        }
                        SmtpSecurity::StartTlsRequired => true,
                        // Never fall back to plaintext after a failed upgrade.
                        _ => offers,
                    };
                    if upgrade {
                        connection
                            .starttls(tls_parameters(endpoint)?, client_id)
                            .await
                            .map_err(|error| fault(&error, SmtpStage::Session))?;
                    }
                    connection
                }
            };
            Ok::<_, AttemptFault>(connection)
        })
        .await
        .map_err(|_| timed_out(self.settings.timeout))??;

        let authenticated = timeout(self.settings.timeout, async {
            let pipelining = offers_pipelining(&mut connection, client_id).await?;
            let info = connection.server_info();
            if MECHANISMS.iter().any(|&m| info.supports_auth_mechanism(m)) {
                let credentials =
                    Credentials::new(endpoint.user.clone(), endpoint.password.expose().to_owned());
                connection
                    .auth(&MECHANISMS, &credentials)
                    .await
                    .map_err(|error| fault(&error, SmtpStage::Authentication))?;
            }
            Ok::<_, AttemptFault>(pipelining)
        })
        .await
        .map_err(|_| timed_out(self.settings.timeout));
        match authenticated {
            Ok(Ok(pipelining)) => Ok(Pooled::new(connection, pipelining)),
            Ok(Err(error)) | Err(error) => {
                connection.abort().await;
                Err(error)
            }
        }
    }

    /// One mail transaction, bounded by the timeout, reporting where it stopped.
    async fn transact(
        &self,
        session: &mut Pooled,
        envelope: &Envelope,
        contact: &Address,
        bytes: &[u8],
    ) -> Result<MailAccepted, Refusal> {
        let mut progress = Progress {
            stage: Stage::Envelope,
            blame: SmtpStage::MailFrom,
            refused_copies: Vec::new(),
            connection_lost: false,
        };
        let outcome = timeout(self.settings.timeout, async {
            let connection = &mut session.connection;
            let mail = Mail::new(
                envelope.from().cloned(),
                mail_parameters(connection, envelope, bytes),
            );
            if session.pipelining && envelope.to().len() <= PIPELINED_RECIPIENTS {
                pipelined_envelope(connection, mail, envelope, contact, &mut progress).await?;
            } else {
                stepwise_envelope(connection, mail, envelope, contact, &mut progress).await?;
            }
            progress.stage = Stage::Content;
            let response = match std::str::from_utf8(bytes) {
                Ok(text) => connection.command(Content(text)).await?,
                // Never for what `build_message` makes (ASCII, or UTF-8 under 8BITMIME).
                Err(_) => connection.message(bytes).await?,
            };
            let code: u16 = response.code().to_string().parse().unwrap_or(250);
            let text = response.message().collect::<Vec<_>>().join(" ");
            Ok::<_, SmtpError>(SmtpReply::new(code, &text))
        })
        .await;
        match outcome {
            Ok(Ok(reply)) => Ok(MailAccepted {
                reply,
                // The envelope's recipients are the contact and the copies; the refused
                // ones were never sent.
                copies: u32::try_from(
                    envelope
                        .to()
                        .len()
                        .saturating_sub(1 + progress.refused_copies.len()),
                )
                .unwrap_or(u32::MAX),
                refused_copies: progress.refused_copies,
            }),
            Ok(Err(error)) => Err(refusal(&error, &progress)),
            Err(_) => Err(Refusal {
                fault: timed_out(self.settings.timeout),
                stage: progress.stage,
                alive: false,
            }),
        }
    }
}

/// How far a transaction got: where it stands for resending, the step a refusal
/// answers, the copies refused so far, and whether the connection must be closed even
/// though the refusal was a reply.
struct Progress {
    stage: Stage,
    blame: SmtpStage,
    refused_copies: Vec<(String, SmtpReply)>,
    connection_lost: bool,
}

impl Progress {
    /// Blames the reply to `recipient`'s `RCPT TO` from here on.
    fn await_recipient(&mut self, recipient: &Address, contact: &Address) {
        let is_contact =
            AsRef::<str>::as_ref(recipient).eq_ignore_ascii_case(AsRef::<str>::as_ref(contact));
        self.blame = if is_contact {
            SmtpStage::ContactRecipient
        } else {
            SmtpStage::CopyRecipient(recipient.to_string())
        };
    }

    /// Takes a `RCPT TO` reply: `Ok(true)` accepted, `Ok(false)` a copy refused (noted;
    /// the message goes to the others), `Err` a refusal that ends the transaction.
    fn recipient_reply(&mut self, reply: Result<Response, SmtpError>) -> Result<bool, SmtpError> {
        match reply {
            Ok(_) => Ok(true),
            Err(error) => match (&self.blame, reply_of(&error)) {
                (SmtpStage::CopyRecipient(address), Some(reply)) if reply.code != 421 => {
                    self.refused_copies.push((address.clone(), reply));
                    Ok(false)
                }
                _ => Err(error),
            },
        }
    }

    /// Ready for `DATA`'s reply, `accepted` recipients taken.
    fn await_data(&mut self, accepted: usize) {
        self.blame = SmtpStage::Data {
            contact_only: accepted == 1,
        };
        self.stage = Stage::Data;
    }
}

/// RFC 6531 and RFC 6152: announce what the server said it takes; a server that does not
/// take it refuses, which is its answer to give.
fn mail_parameters(
    connection: &AsyncSmtpConnection,
    envelope: &Envelope,
    bytes: &[u8],
) -> Vec<MailParameter> {
    let info = connection.server_info();
    let mut parameters = Vec::new();
    let ascii = |address: &Address| AsRef::<str>::as_ref(address).is_ascii();
    let non_ascii_address = envelope.from().is_some_and(|from| !ascii(from))
        || envelope.to().iter().any(|to| !ascii(to));
    if non_ascii_address && info.supports_feature(Extension::SmtpUtfEight) {
        parameters.push(MailParameter::SmtpUtfEight);
    }
    if !bytes.is_ascii() && info.supports_feature(Extension::EightBitMime) {
        parameters.push(MailParameter::Body(MailBodyParameter::EightBitMime));
    }
    parameters
}

/// The envelope one command at a time: `MAIL FROM`, `RCPT TO` each, `DATA`, each
/// answered before the next is written. `progress.stage` moves to [`Stage::Data`] just
/// before `DATA` is written; `progress.blame` names the command whose reply is awaited.
///
/// A refused Cc or Bcc recipient (any reply but 421, which closes the session) does not
/// stop the transaction: it is noted and the message goes to the others
/// (docs/api-decisions.md, "Who a refusal blames").
async fn stepwise_envelope(
    connection: &mut AsyncSmtpConnection,
    mail: Mail,
    envelope: &Envelope,
    contact: &Address,
    progress: &mut Progress,
) -> Result<(), SmtpError> {
    progress.blame = SmtpStage::MailFrom;
    connection.command(mail).await?;
    let mut accepted = 0usize;
    for recipient in envelope.to() {
        progress.await_recipient(recipient, contact);
        let reply = connection
            .command(Rcpt::new(recipient.clone(), Vec::new()))
            .await;
        if progress.recipient_reply(reply)? {
            accepted += 1;
        }
    }
    progress.await_data(accepted);
    connection.command(Data).await?;
    Ok(())
}

/// `MAIL FROM`, every `RCPT TO` and `DATA` in one write (RFC 2920 §3.1: a client may
/// pipeline them when the server offers `PIPELINING`).
struct PipelinedEnvelope<'a> {
    mail: Mail,
    recipients: &'a [Address],
}

impl std::fmt::Display for PipelinedEnvelope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.mail)?;
        for recipient in self.recipients {
            write!(f, "{}", Rcpt::new(recipient.clone(), Vec::new()))?;
        }
        write!(f, "{Data}")
    }
}

/// The envelope pipelined: one write, then every reply read in order and judged as the
/// stepwise envelope judges it. The first refusal that ends the transaction is kept
/// while the remaining replies are read (they answer commands the server already has:
/// leaving them unread would make them the answers to the next commands); a lost
/// connection or a 421 ends it at once. `progress.stage` moves to [`Stage::Data`] when
/// `DATA`'s reply is awaited, as in the stepwise envelope.
async fn pipelined_envelope(
    connection: &mut AsyncSmtpConnection,
    mail: Mail,
    envelope: &Envelope,
    contact: &Address,
    progress: &mut Progress,
) -> Result<(), SmtpError> {
    // Whether a reply error still lets the remaining replies be read.
    let answered = |error: &SmtpError| reply_of(error).is_some_and(|reply| reply.code != 421);
    let mut refused: Option<(SmtpStage, SmtpError)> = None;
    progress.blame = SmtpStage::MailFrom;
    let commands = PipelinedEnvelope {
        mail,
        recipients: envelope.to(),
    };
    match connection.command(commands).await {
        Ok(_) => {}
        Err(error) if answered(&error) => refused = Some((SmtpStage::MailFrom, error)),
        Err(error) => return Err(error),
    }
    let mut accepted = 0usize;
    for recipient in envelope.to() {
        progress.await_recipient(recipient, contact);
        let reply = connection.read_response().await;
        if refused.is_some() {
            // After a refused sender every RCPT TO is refused too (503); only a lost
            // connection matters now.
            match reply {
                Err(error) if !answered(&error) => return Err(error),
                _ => continue,
            }
        }
        match progress.recipient_reply(reply) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(error) if answered(&error) => {
                refused = Some((progress.blame.clone(), error));
            }
            Err(error) => return Err(error),
        }
    }
    progress.await_data(accepted);
    let data = connection.read_response().await;
    let Some((blame, error)) = refused else {
        return data.map(drop);
    };
    match data {
        // DATA refused (no valid recipient, bad sequence): the transaction stays open
        // for RSET, as after a stepwise refusal.
        Err(data_error) if answered(&data_error) => {}
        // The server waits for content that must not go (the contact or the sender was
        // refused, a copy accepted), or the connection was lost: close it, which makes
        // the server drop the transaction.
        _ => progress.connection_lost = true,
    }
    progress.blame = blame;
    Err(error)
}

/// A message's content as SMTP sends it after `DATA` (RFC 5321 §4.5.2): one more dot
/// before every line that starts with a dot, then `CRLF . CRLF`, in one write. lettre's
/// `AsyncSmtpConnection::message` does the same byte by byte and writes the ending
/// separately: its loop was 18 % of the mailer's CPU in the delivery bench's profile
/// (docs/operations.md, "Delivery engine"). Lines end in
/// CRLF in what lettre formats, and only a dot after CRLF (or at the start) is doubled,
/// as lettre does.
struct Content<'a>(&'a str);

impl std::fmt::Display for Content<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.0;
        if text.starts_with('.') {
            f.write_str(".")?;
        }
        let mut written = 0;
        for found in memchr::memmem::find_iter(text.as_bytes(), b"\r\n.") {
            // Up to the dot (a character boundary: CR and LF are ASCII), then the extra dot.
            let dot = found + 2;
            f.write_str(&text[written..dot])?;
            f.write_str(".")?;
            written = dot;
        }
        f.write_str(&text[written..])?;
        f.write_str("\r\n.\r\n")
    }
}

/// Asks EHLO again and reads whether the server offers `PIPELINING` (lettre's own EHLO
/// keeps only the keywords lettre acts on). A refused second EHLO means one command at
/// a time; a lost connection fails the connection.
async fn offers_pipelining(
    connection: &mut AsyncSmtpConnection,
    client_id: &ClientId,
) -> Result<bool, AttemptFault> {
    match connection.command(Ehlo::new(client_id.clone())).await {
        Ok(response) => Ok(response.message().any(|line| {
            line.split_whitespace()
                .next()
                .is_some_and(|keyword| keyword.eq_ignore_ascii_case("PIPELINING"))
        })),
        Err(error) if reply_of(&error).is_some_and(|reply| reply.code != 421) => Ok(false),
        Err(error) => Err(fault(&error, SmtpStage::Session)),
    }
}

/// Sorts a failed transaction: a reply other than 421 leaves the connection usable
/// (unless the transaction had to be abandoned, `connection_lost`); 421 (the server is
/// closing) and any I/O error do not.
fn refusal(error: &SmtpError, progress: &Progress) -> Refusal {
    let fault = fault(error, progress.blame.clone());
    let alive = !progress.connection_lost
        && match &fault {
            AttemptFault::Reply(_, reply) => reply.code != 421,
            _ => false,
        };
    Refusal {
        fault,
        stage: progress.stage,
        alive,
    }
}

impl Mailer for SmtpMailer {
    fn send<'a>(&'a self, mail: &'a OutgoingMail) -> MailFuture<'a> {
        Box::pin(self.deliver(mail))
    }
}

fn timed_out(limit: Duration) -> AttemptFault {
    AttemptFault::Connection(format!(
        "the mail server did not answer within {} s",
        limit.as_secs_f32()
    ))
}

/// The name TLS verifies the certificate against: the configured host (the address is
/// pinned, the identity is not), without IPv6 brackets.
fn tls_host(endpoint: &SmtpEndpoint) -> &str {
    let host = endpoint.host.trim();
    host.strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host)
}

/// STARTTLS parameters that verify the certificate against the configured host name,
/// unless insecure TLS was asked for.
fn tls_parameters(endpoint: &SmtpEndpoint) -> Result<TlsParameters, AttemptFault> {
    TlsParameters::builder(tls_host(endpoint).to_owned())
        .dangerous_accept_invalid_certs(endpoint.allow_insecure_tls)
        .dangerous_accept_invalid_hostnames(endpoint.allow_insecure_tls)
        .build_rustls()
        .map_err(|error| AttemptFault::Connection(format!("TLS: {error}")))
}

/// The server's reply inside a lettre error, if the error is one.
fn reply_of(error: &SmtpError) -> Option<SmtpReply> {
    let code: u16 = error.status()?.to_string().parse().unwrap_or(554);
    let text = error.source().map(ToString::to_string).unwrap_or_default();
    Some(SmtpReply::new(code, &text))
}

/// A server reply keeps its code and text and the step it answered; anything else is a
/// connection fault.
fn fault(error: &SmtpError, stage: SmtpStage) -> AttemptFault {
    if let Some(reply) = reply_of(error) {
        return AttemptFault::Reply(stage, reply);
    }
    let described = error
        .source()
        .map_or_else(|| error.to_string(), ToString::to_string);
    if error.is_timeout() {
        return AttemptFault::Connection(format!("timed out: {described}"));
    }
    let io_kind = error
        .source()
        .and_then(|source| source.downcast_ref::<io::Error>())
        .map(io::Error::kind);
    match io_kind {
        Some(kind) => AttemptFault::Connection(format!("{kind}: {described}")),
        None => AttemptFault::Connection(described),
    }
}

fn mailbox(mailbox: &rendering::Mailbox, field: &str) -> Result<Mailbox, AttemptFault> {
    let address: Address = mailbox
        .email
        .trim()
        .parse()
        .map_err(|error| AttemptFault::Permanent(format!("{field}: {error}")))?;
    Ok(Mailbox::new(mailbox.name.clone(), address))
}

fn mailboxes(list: &str, field: &str) -> Result<Mailboxes, AttemptFault> {
    list.parse()
        .map_err(|error| AttemptFault::Permanent(format!("{field}: {error}")))
}

/// The most Cc and Bcc recipients one message may have together (RFC 5321's minimum a
/// server must take per message is 100 recipients): each is one more `RCPT` past the
/// contact's suppression and the send limit, so a `cc` that renders to hundreds of
/// addresses fails its message instead.
pub const MAX_COPY_RECIPIENTS: usize = 100;

/// The length a folded address header's lines keep to (RFC 5322 recommends 78, and
/// allows no line past 998).
const FOLD_AT: usize = 78;

/// The MIME message and its envelope (To, Cc and Bcc as recipients; Bcc not in the
/// headers).
fn build_message(mail: &OutgoingMail) -> Result<(Envelope, Vec<u8>), AttemptFault> {
    let rendered = &mail.rendered;
    let from = mailbox(&rendered.from, "from")?;
    let to = mailbox(&rendered.to, "to")?;
    // The envelope is made here from the mailboxes already parsed: left to lettre, it
    // parsed the From, To, Cc and Bcc headers back from their text (4 % of the worker's
    // CPU). A VERP return path replaces only the envelope sender: the From header and the
    // DKIM signature (over headers and body, not the envelope) stay as they are.
    let sender = match &mail.return_path {
        None => from.email.clone(),
        Some(return_path) => return_path.parse().map_err(|error| {
            AttemptFault::Permanent(format!("the return path cannot be used: {error}"))
        })?,
    };
    let mut recipients = vec![to.email.clone()];
    let mut builder = Message::builder()
        .from(from)
        .to(to)
        .subject(rendered.subject.clone())
        .message_id(Some(mail.message_id_header.clone()))
        .date(SystemTime::from(mail.date.as_datetime()));
    if let Some(list_unsubscribe) = &mail.list_unsubscribe {
        builder = builder
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("List-Unsubscribe"),
                list_unsubscribe.header_value(),
            ))
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("List-Unsubscribe-Post"),
                "List-Unsubscribe=One-Click".to_owned(),
            ));
    }
    for (list, field) in [
        (&rendered.cc, "cc"),
        (&rendered.bcc, "bcc"),
        (&rendered.reply_to, "replyTo"),
    ] {
        let Some(list) = list else { continue };
        for entry in mailboxes(list, field)? {
            if field != "replyTo" {
                recipients.push(entry.email.clone());
            }
            builder = match field {
                "cc" => builder.cc(entry),
                "bcc" => builder.bcc(entry),
                _ => builder.reply_to(entry),
            };
        }
    }
    let html = SinglePart::builder()
        .header(ContentType::TEXT_HTML)
        .body(crate::body::encode_text(&rendered.html));
    let body = match &rendered.text {
        Some(text) => Either::Multi(
            MultiPart::alternative()
                .singlepart(
                    SinglePart::builder()
                        .header(ContentType::TEXT_PLAIN)
                        .body(crate::body::encode_text(text)),
                )
                .singlepart(html),
        ),
        None => Either::Single(html),
    };
    let copies = recipients.len() - 1;
    if copies > MAX_COPY_RECIPIENTS {
        return Err(AttemptFault::Permanent(format!(
            "the message has {copies} Cc and Bcc recipients; at most {MAX_COPY_RECIPIENTS} are sent"
        )));
    }
    let envelope = Envelope::new(Some(sender), recipients).map_err(|error| {
        AttemptFault::Permanent(format!("the envelope cannot be built: {error}"))
    })?;
    let builder = builder.envelope(envelope);
    let message = match &mail.dkim {
        None => match body {
            Either::Multi(part) => builder.multipart(part),
            Either::Single(part) => builder.singlepart(part),
        }
        .map_err(|error| {
            AttemptFault::Permanent(format!("the message cannot be built: {error}"))
        })?,
        Some(signing) => {
            let split = match &body {
                Either::Multi(part) => SplitBody::new(&part.formatted(), part.headers()),
                Either::Single(part) => SplitBody::new(&part.formatted(), part.headers()),
            };
            let mut message = split.build(builder)?;
            crate::dkim::sign(&mut message, signing);
            message
        }
    };
    Ok((
        message.envelope().clone(),
        fold_address_headers(message.formatted()),
    ))
}

/// Folds the `Cc` and `Reply-To` header lines past [`FOLD_AT`] characters between their
/// addresses (lettre writes an address list on one line: about 42 addresses pass RFC
/// 5322's 998, and a strict server answers "500 Line too long"). A fold is a CRLF before
/// the space after a comma outside quotes, so unfolding gives the field back as it was,
/// which is also what DKIM's relaxed canonicalization signs.
fn fold_address_headers(message: Vec<u8>) -> Vec<u8> {
    let Some(end) = message.windows(4).position(|w| w == b"\r\n\r\n") else {
        return message;
    };
    let long = message[..end].split(|&b| b == b'\n').any(|line| {
        line.len() > FOLD_AT + 1 && (line.starts_with(b"Cc: ") || line.starts_with(b"Reply-To: "))
    });
    if !long {
        return message;
    }
    let mut out = Vec::with_capacity(message.len() + 64);
    for line in message[..end].split_inclusive(|&b| b == b'\n') {
        let folds = line.starts_with(b"Cc: ") || line.starts_with(b"Reply-To: ");
        if folds && line.len() > FOLD_AT + 2 {
            fold_line(line, &mut out);
        } else {
            out.extend_from_slice(line);
        }
    }
    out.extend_from_slice(&message[end..]);
    out
}

/// Writes one header line (CRLF included) folded at the spaces after commas outside
/// quoted strings, each line kept to [`FOLD_AT`] where an address allows.
fn fold_line(line: &[u8], out: &mut Vec<u8>) {
    let body = line.strip_suffix(b"\r\n").unwrap_or(line);
    // Where a fold may go: the index of each space that follows a comma outside quotes.
    let mut breaks = Vec::new();
    let mut quoted = false;
    let mut escaped = false;
    for (index, &byte) in body.iter().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b' ' if !quoted && index > 0 && body[index - 1] == b',' => breaks.push(index),
            _ => {}
        }
    }
    let mut start = 0;
    let mut last_break = None;
    for &at in &breaks {
        if at - start > FOLD_AT {
            if let Some(fold) = last_break.filter(|&fold| fold > start) {
                out.extend_from_slice(&body[start..fold]);
                out.extend_from_slice(b"\r\n");
                start = fold;
            }
        }
        last_break = Some(at);
    }
    if body.len() - start > FOLD_AT {
        if let Some(fold) = last_break.filter(|&fold| fold > start) {
            out.extend_from_slice(&body[start..fold]);
            out.extend_from_slice(b"\r\n");
            start = fold;
        }
    }
    out.extend_from_slice(&body[start..]);
    out.extend_from_slice(b"\r\n");
}

/// The message's MIME body: HTML alone, or text and HTML as alternatives.
enum Either {
    Single(SinglePart),
    Multi(MultiPart),
}

#[cfg(test)]
mod tests {
    use mailroom_app::rendering::{Mailbox as Rendered, RenderedMessage};
    use mailroom_domain::{secret::SecretString, Timestamp};

    use super::*;

    fn mail(bcc: Option<&str>) -> OutgoingMail {
        OutgoingMail {
            endpoint: SmtpEndpoint {
                host: "127.0.0.1".into(),
                port: 25,
                security: SmtpSecurity::StartTlsOpportunistic,
                allow_insecure_tls: false,
                user: String::new(),
                password: SecretString::new(""),
                saved: None,
            },
            rendered: RenderedMessage {
                subject: "Hello".into(),
                html: "<p>Hi</p>".into(),
                text: Some("Hi".into()),
                from: Rendered {
                    name: Some("Acme".into()),
                    email: "hello@acme.example".into(),
                },
                to: Rendered {
                    name: None,
                    email: "ada@example.org".into(),
                },
                cc: None,
                bcc: bcc.map(str::to_owned),
                reply_to: Some("Support <help@acme.example>".into()),
                click_tracking: false,
                open_tracking: false,
            },
            message_id_header: "<m1@acme.example>".into(),
            date: Timestamp::parse("2026-11-22T12:00:00.000Z").unwrap(),
            list_unsubscribe: None,
            dkim: None,
            return_path: None,
        }
    }

    #[test]
    fn cc_past_78_characters_is_folded_between_addresses_and_unfolds_to_the_same() {
        let mut many = mail(None);
        // 46 addresses: one line of about 1,050 characters, past RFC 5322's 998.
        let list: Vec<String> = (0..45)
            .map(|n| format!("person-{n:02}@example.org"))
            .collect();
        many.rendered.cc = Some(format!(
            "\"Doe, Jane\" <jane@example.org>, {}",
            list.join(", ")
        ));
        let (envelope, bytes) = build_message(&many).unwrap();
        assert_eq!(envelope.to().len(), 47);
        let text = String::from_utf8(bytes).unwrap();
        let head = text.split("\r\n\r\n").next().unwrap();
        let longest = head.split("\r\n").map(str::len).max().unwrap();
        assert!(
            longest <= 78,
            "a header line of {longest} characters:\n{head}"
        );
        let cc = head
            .split("\r\nCc: ")
            .nth(1)
            .unwrap()
            .split("\r\n")
            .take_while(|_| true)
            .collect::<Vec<_>>();
        // The field is the lines up to the next header; unfolded, the addresses as before.
        let mut field = String::new();
        for (n, line) in cc.iter().enumerate() {
            if n > 0 && !line.starts_with(' ') {
                break;
            }
            field.push_str(line);
        }
        // Unfolded, the field lettre wrote (the quoted name as an encoded word).
        assert_eq!(
            field,
            format!(
                "=?utf-8?b?RG9lLCBKYW5l?= <jane@example.org>, {}",
                list.join(", ")
            )
        );
        // A comma inside a quoted display name is no place to fold.
        let quoted = format!(
            "Reply-To: \"{}, Jane\" <jane@example.org>, other@example.org\r\n",
            "D".repeat(90)
        );
        let mut folded = Vec::new();
        fold_line(quoted.as_bytes(), &mut folded);
        assert_eq!(
            String::from_utf8(folded).unwrap(),
            format!(
                "Reply-To: \"{}, Jane\" <jane@example.org>,\r\n other@example.org\r\n",
                "D".repeat(90)
            )
        );
    }

    #[test]
    fn more_than_100_cc_and_bcc_recipients_fail_the_message() {
        let mut many = mail(None);
        let list: Vec<String> = (0..60).map(|n| format!("c{n}@example.org")).collect();
        many.rendered.cc = Some(list.join(", "));
        let list: Vec<String> = (0..41).map(|n| format!("b{n}@example.org")).collect();
        many.rendered.bcc = Some(list.join(", "));
        match build_message(&many) {
            Err(AttemptFault::Permanent(reason)) => {
                assert!(reason.contains("101 Cc and Bcc recipients"), "{reason}");
            }
            other => panic!("expected a permanent failure: {other:?}"),
        }
        many.rendered.bcc = Some(list[..40].join(", "));
        assert_eq!(build_message(&many).unwrap().0.to().len(), 101);
    }

    #[test]
    fn a_return_path_replaces_the_envelope_sender_only() {
        let mut with_verp = mail(None);
        with_verp.return_path = Some("bounces+abc@bounces.acme.example".into());
        let (envelope, bytes) = build_message(&with_verp).unwrap();
        assert_eq!(
            envelope.from().map(ToString::to_string).as_deref(),
            Some("bounces+abc@bounces.acme.example")
        );
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains("bounces+abc"), "{text}");
    }

    #[test]
    fn bcc_goes_in_the_envelope_only_and_the_message_id_is_kept() {
        let (envelope, bytes) = build_message(&mail(Some("audit@acme.example"))).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(envelope.to().len(), 2);
        assert!(!text.contains("audit@acme.example"), "{text}");
        assert!(text.contains("Message-ID: <m1@acme.example>"), "{text}");
        assert!(
            text.contains("Reply-To: Support <help@acme.example>"),
            "{text}"
        );
        assert!(text.contains("multipart/alternative"), "{text}");
    }

    #[test]
    fn list_unsubscribe_headers_are_written_only_when_given() {
        let (_, bytes) = build_message(&mail(None)).unwrap();
        let plain = String::from_utf8(bytes).unwrap();
        assert!(!plain.contains("List-Unsubscribe"), "{plain}");

        let mut listed = mail(None);
        listed.list_unsubscribe = Some(mailroom_app::ports::ListUnsubscribe {
            url: "https://mail.acme.example/u/TOKEN".into(),
            mailto: Some("mailto:unsubscribe@acme.example?subject=unsubscribe".into()),
        });
        let (_, bytes) = build_message(&listed).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.contains("List-Unsubscribe: <https://mail.acme.example/u/TOKEN>,"),
            "{text}"
        );
        assert!(
            text.contains("<mailto:unsubscribe@acme.example?subject=unsubscribe>"),
            "{text}"
        );
        assert!(
            text.contains("List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"),
            "{text}"
        );
    }

    #[test]
    fn content_doubles_a_leading_dot_on_every_line_and_ends_with_a_lone_dot() {
        let sent = |text: &str| Content(text).to_string();
        assert_eq!(sent("Hi\r\nthere"), "Hi\r\nthere\r\n.\r\n");
        assert_eq!(sent(".start"), "..start\r\n.\r\n");
        assert_eq!(
            sent("a\r\n.b\r\n..c\r\n.\r\nd"),
            "a\r\n..b\r\n...c\r\n..\r\nd\r\n.\r\n"
        );
        // Only CRLF ends a line in what lettre formats; a lone LF is not a line end.
        assert_eq!(sent("a\n.b"), "a\n.b\r\n.\r\n");
        assert_eq!(sent("ends\r\n."), "ends\r\n..\r\n.\r\n");
        assert_eq!(sent(""), "\r\n.\r\n");
        assert_eq!(sent("é\r\n.ü"), "é\r\n..ü\r\n.\r\n");
    }

    #[test]
    fn an_unparseable_address_is_a_permanent_fault() {
        let fault = build_message(&mail(Some("not an address"))).unwrap_err();
        assert!(matches!(fault, AttemptFault::Permanent(_)), "{fault:?}");
    }
}
