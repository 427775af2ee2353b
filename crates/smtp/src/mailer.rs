//! The `Mailer` port over lettre's async SMTP client, on connections Mailroom dials itself
//! and keeps in a pool per mail server.
//!
//! A new connection: resolve once through the egress guard, dial the checked address
//! (with `TCP_NODELAY`), secure it as the server's mode says (implicit TLS here, STARTTLS
//! through lettre), authenticate when AUTH is advertised. Then each message is one mail
//! transaction on a pooled connection (see [`crate::pool`]): `MAIL FROM`, `RCPT TO`,
//! `DATA`. A transaction refused before `DATA` is reset (`RSET`) and the connection kept.
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
use lettre::transport::smtp::commands::{Data, Mail, Rcpt, Rset};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
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
    /// `DATA` was sent, the content not yet: never resent at once from here on (the
    /// duplicate window), but a refused `DATA` leaves the transaction open.
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
                None => Pooled::new(self.open(&server, &mail.endpoint).await?),
            };
            match self
                .transact(&mut pooled.connection, &envelope, &contact, &bytes)
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
    ) -> Result<AsyncSmtpConnection, AttemptFault> {
        if let Some(refusal) = server.recent_refusal() {
            return Err(refusal);
        }
        match self.connect(endpoint).await {
            Ok(connection) => {
                server.forget_refusal();
                Ok(connection)
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
    /// greeted and authenticated.
    async fn connect(&self, endpoint: &SmtpEndpoint) -> Result<AsyncSmtpConnection, AttemptFault> {
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
            // lettre writes the body and the final dot in separate writes; with Nagle on,
            // the receiver's delayed ACK stalls every message by about 40 ms.
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
            let info = connection.server_info();
            if MECHANISMS.iter().any(|&m| info.supports_auth_mechanism(m)) {
                let credentials =
                    Credentials::new(endpoint.user.clone(), endpoint.password.expose().to_owned());
                connection
                    .auth(&MECHANISMS, &credentials)
                    .await
                    .map_err(|error| fault(&error, SmtpStage::Authentication))?;
            }
            Ok::<_, AttemptFault>(())
        })
        .await
        .map_err(|_| timed_out(self.settings.timeout));
        match authenticated {
            Ok(Ok(())) => Ok(connection),
            Ok(Err(error)) | Err(error) => {
                connection.abort().await;
                Err(error)
            }
        }
    }

    /// One mail transaction, bounded by the timeout, reporting where it stopped.
    async fn transact(
        &self,
        connection: &mut AsyncSmtpConnection,
        envelope: &Envelope,
        contact: &Address,
        bytes: &[u8],
    ) -> Result<MailAccepted, Refusal> {
        let mut progress = Progress {
            stage: Stage::Envelope,
            blame: SmtpStage::MailFrom,
            refused_copies: Vec::new(),
        };
        let outcome = timeout(
            self.settings.timeout,
            transaction(connection, envelope, contact, bytes, &mut progress),
        )
        .await;
        match outcome {
            Ok(Ok(reply)) => Ok(MailAccepted {
                reply,
                refused_copies: progress.refused_copies,
            }),
            Ok(Err(error)) => Err(refusal(&error, progress.stage, progress.blame)),
            Err(_) => Err(Refusal {
                fault: timed_out(self.settings.timeout),
                stage: progress.stage,
                alive: false,
            }),
        }
    }
}

/// How far a transaction got: where it stands for resending, the step a refusal
/// answers, and the copies refused so far.
struct Progress {
    stage: Stage,
    blame: SmtpStage,
    refused_copies: Vec<(String, SmtpReply)>,
}

/// `MAIL FROM`, `RCPT TO` each, `DATA`, the content. `progress.stage` moves to
/// [`Stage::Data`] just before `DATA` is written and to [`Stage::Content`] once it is
/// answered 354; `progress.blame` names the command whose reply is awaited.
///
/// A refused Cc or Bcc recipient (any reply but 421, which closes the session) does not
/// stop the transaction: it is noted and the message goes to the others
/// (docs/api-decisions.md, "Who a refusal blames").
async fn transaction(
    connection: &mut AsyncSmtpConnection,
    envelope: &Envelope,
    contact: &Address,
    bytes: &[u8],
    progress: &mut Progress,
) -> Result<SmtpReply, SmtpError> {
    let info = connection.server_info();
    let mut parameters = Vec::new();
    // RFC 6531 and RFC 6152: announce what the server said it takes; a server that does
    // not take it refuses, which is its answer to give.
    let ascii = |address: &Address| AsRef::<str>::as_ref(address).is_ascii();
    let non_ascii_address = envelope.from().is_some_and(|from| !ascii(from))
        || envelope.to().iter().any(|to| !ascii(to));
    if non_ascii_address && info.supports_feature(Extension::SmtpUtfEight) {
        parameters.push(MailParameter::SmtpUtfEight);
    }
    if !bytes.is_ascii() && info.supports_feature(Extension::EightBitMime) {
        parameters.push(MailParameter::Body(MailBodyParameter::EightBitMime));
    }
    progress.blame = SmtpStage::MailFrom;
    connection
        .command(Mail::new(envelope.from().cloned(), parameters))
        .await?;
    let is_contact = |address: &Address| {
        AsRef::<str>::as_ref(address).eq_ignore_ascii_case(AsRef::<str>::as_ref(contact))
    };
    let mut accepted = 0usize;
    for recipient in envelope.to() {
        progress.blame = if is_contact(recipient) {
            SmtpStage::ContactRecipient
        } else {
            SmtpStage::CopyRecipient(recipient.to_string())
        };
        match connection
            .command(Rcpt::new(recipient.clone(), Vec::new()))
            .await
        {
            Ok(_) => accepted += 1,
            Err(error) => match (&progress.blame, reply_of(&error)) {
                (SmtpStage::CopyRecipient(address), Some(reply)) if reply.code != 421 => {
                    progress.refused_copies.push((address.clone(), reply));
                }
                _ => return Err(error),
            },
        }
    }
    progress.blame = SmtpStage::Data {
        contact_only: accepted == 1,
    };
    progress.stage = Stage::Data;
    connection.command(Data).await?;
    progress.stage = Stage::Content;
    let response = connection.message(bytes).await?;
    let code: u16 = response.code().to_string().parse().unwrap_or(250);
    let text = response.message().collect::<Vec<_>>().join(" ");
    Ok(SmtpReply::new(code, &text))
}

/// Sorts a failed transaction: a reply other than 421 leaves the connection usable; 421
/// (the server is closing) and any I/O error do not.
fn refusal(error: &SmtpError, stage: Stage, blame: SmtpStage) -> Refusal {
    let fault = fault(error, blame);
    let alive = match &fault {
        AttemptFault::Reply(_, reply) => reply.code != 421,
        _ => false,
    };
    Refusal {
        fault,
        stage,
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

/// The MIME message and its envelope (To, Cc and Bcc as recipients; Bcc not in the
/// headers).
fn build_message(mail: &OutgoingMail) -> Result<(Envelope, Vec<u8>), AttemptFault> {
    let rendered = &mail.rendered;
    let mut builder = Message::builder()
        .from(mailbox(&rendered.from, "from")?)
        .to(mailbox(&rendered.to, "to")?)
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
            builder = match field {
                "cc" => builder.cc(entry),
                "bcc" => builder.bcc(entry),
                _ => builder.reply_to(entry),
            };
        }
    }
    let html = SinglePart::builder()
        .header(ContentType::TEXT_HTML)
        .body(rendered.html.clone());
    let body = match &rendered.text {
        Some(text) => Either::Multi(
            MultiPart::alternative()
                .singlepart(
                    SinglePart::builder()
                        .header(ContentType::TEXT_PLAIN)
                        .body(text.clone()),
                )
                .singlepart(html),
        ),
        None => Either::Single(html),
    };
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
    // A VERP return path replaces only the envelope sender: the From header and the
    // DKIM signature (over headers and body, not the envelope) stay as they are.
    let envelope = match &mail.return_path {
        None => message.envelope().clone(),
        Some(return_path) => {
            let sender = return_path.parse().map_err(|error| {
                AttemptFault::Permanent(format!("the return path cannot be used: {error}"))
            })?;
            Envelope::new(Some(sender), message.envelope().to().to_vec()).map_err(|error| {
                AttemptFault::Permanent(format!("the envelope cannot be built: {error}"))
            })?
        }
    };
    Ok((envelope, message.formatted()))
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
    fn an_unparseable_address_is_a_permanent_fault() {
        let fault = build_message(&mail(Some("not an address"))).unwrap_err();
        assert!(matches!(fault, AttemptFault::Permanent(_)), "{fault:?}");
    }
}
