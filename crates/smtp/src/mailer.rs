//! The `Mailer` port over lettre's async SMTP client, on connections Mailroom dials itself.
//!
//! One session per message for now: resolve once through the egress guard, dial the
//! checked address (with `TCP_NODELAY`), secure the connection as the server's mode says
//! (implicit TLS here, STARTTLS through lettre), authenticate when
//! AUTH is advertised, send, quit. Connection reuse (a pool per mail server) and per-server
//! rate limits are later work.

use std::error::Error as _;
use std::io;
use std::time::{Duration, SystemTime};

use lettre::address::Envelope;
use lettre::message::{
    header::{ContentType, HeaderName, HeaderValue},
    Mailbox, Mailboxes, MultiPart, SinglePart,
};
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::transport::smtp::Error as SmtpError;
use lettre::{Address, Message};
use mailroom_app::ports::{
    MailFuture, Mailer, OutgoingMail, ProbeError, SmtpEndpoint, SmtpSecurity,
};
use mailroom_app::rendering;
use mailroom_domain::message::{AttemptFault, SmtpReply};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::implicit_tls::ImplicitTlsStream;
use crate::resolve::resolve_pinned;

/// The mechanisms Mailroom speaks, in order of preference.
const MECHANISMS: [Mechanism; 2] = [Mechanism::Plain, Mechanism::Login];

/// Operator settings of [`SmtpMailer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MailerSettings {
    /// Let connections reach private and loopback addresses
    /// (`MAILROOM_ALLOW_PRIVATE_EGRESS`). Off in production; tests on loopback need it.
    pub allow_private_egress: bool,
    /// Bound on resolution, on connecting (with TLS and EHLO), and on the rest of the
    /// session each.
    pub timeout: Duration,
}

/// Sends each message in its own SMTP session to the pinned address of its server.
#[derive(Debug, Clone)]
pub struct SmtpMailer {
    settings: MailerSettings,
    /// The name given in EHLO: the machine's host name unless the operator set one.
    client_id: ClientId,
}

impl SmtpMailer {
    /// A mailer with these settings that introduces itself (EHLO) by the machine's host
    /// name, as lettre does by default.
    pub fn new(settings: MailerSettings) -> Self {
        Self {
            settings,
            client_id: ClientId::default(),
        }
    }

    /// A mailer that introduces itself in EHLO as `hello_name` (`MAILROOM_SMTP_HELLO_NAME`):
    /// receiving servers check that name against the sending address's reverse DNS, and a
    /// container's host name is rarely a public one. The caller validates the name.
    pub fn with_hello_name(settings: MailerSettings, hello_name: String) -> Self {
        Self {
            settings,
            client_id: ClientId::Domain(hello_name),
        }
    }

    async fn deliver(&self, mail: &OutgoingMail) -> Result<SmtpReply, AttemptFault> {
        let (envelope, bytes) = build_message(mail)?;
        let endpoint = mail.endpoint.clone();
        let settings = self.settings;
        // The system resolver blocks; `resolve_pinned` bounds it with its own thread.
        let address = tokio::task::spawn_blocking(move || {
            resolve_pinned(
                &endpoint.host,
                endpoint.port,
                settings.allow_private_egress,
                settings.timeout,
            )
        })
        .await
        .map_err(|error| AttemptFault::Connection(format!("resolver task: {error}")))?
        .map_err(|error| match error {
            // The operator's policy, not the network: retrying gives the same answer.
            ProbeError::EgressRefused(_) => AttemptFault::Permanent(error.to_string()),
            other => AttemptFault::Connection(other.to_string()),
        })?;
        let client_id = &self.client_id;
        let endpoint = &mail.endpoint;
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
                    AsyncSmtpConnection::connect_with_transport(Box::new(tls), client_id)
                        .await
                        .map_err(|error| fault(&error))?
                }
                SmtpSecurity::StartTlsRequired | SmtpSecurity::StartTlsOpportunistic => {
                    let mut connection =
                        AsyncSmtpConnection::connect_with_transport(Box::new(stream), client_id)
                            .await
                            .map_err(|error| fault(&error))?;
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
                            .map_err(|error| fault(&error))?;
                    }
                    connection
                }
            };
            Ok::<_, AttemptFault>(connection)
        })
        .await
        .map_err(|_| timed_out(self.settings.timeout))??;

        let session = timeout(self.settings.timeout, async {
            let info = connection.server_info();
            if MECHANISMS.iter().any(|&m| info.supports_auth_mechanism(m)) {
                let credentials =
                    Credentials::new(endpoint.user.clone(), endpoint.password.expose().to_owned());
                connection
                    .auth(&MECHANISMS, &credentials)
                    .await
                    .map_err(|error| fault(&error))?;
            }
            let response = connection
                .send(&envelope, &bytes)
                .await
                .map_err(|error| fault(&error))?;
            let code: u16 = response.code().to_string().parse().unwrap_or(250);
            let text = response.message().collect::<Vec<_>>().join(" ");
            Ok::<_, AttemptFault>(SmtpReply::new(code, &text))
        })
        .await
        .map_err(|_| timed_out(self.settings.timeout));
        match session {
            Ok(Ok(reply)) => {
                // The message is accepted; a server that hangs up before answering QUIT
                // does not undo that.
                let _ = timeout(Duration::from_secs(2), connection.quit()).await;
                Ok(reply)
            }
            Ok(Err(error)) | Err(error) => {
                connection.abort().await;
                Err(error)
            }
        }
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

/// A server reply keeps its code and text; anything else is a connection fault.
fn fault(error: &SmtpError) -> AttemptFault {
    if let Some(code) = error.status() {
        let code: u16 = code.to_string().parse().unwrap_or(554);
        let text = error.source().map(ToString::to_string).unwrap_or_default();
        return AttemptFault::Reply(SmtpReply::new(code, &text));
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
    let message = match &rendered.text {
        Some(text) => builder.multipart(
            MultiPart::alternative()
                .singlepart(
                    SinglePart::builder()
                        .header(ContentType::TEXT_PLAIN)
                        .body(text.clone()),
                )
                .singlepart(html),
        ),
        None => builder.singlepart(html),
    }
    .map_err(|error| AttemptFault::Permanent(format!("the message cannot be built: {error}")))?;
    Ok((message.envelope().clone(), message.formatted()))
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
        }
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
