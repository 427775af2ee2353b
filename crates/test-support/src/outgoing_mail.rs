//! A message ready for the `Mailer` port, addressed to an SMTP server on loopback: the
//! fixture the SMTP adapter's tests and the delivery bench's mailer-alone phase share.

use mailroom_app::ports::{OutgoingMail, SmtpEndpoint, SmtpSecurity};
use mailroom_app::rendering::{Mailbox, RenderedMessage};
use mailroom_domain::{secret::SecretString, Timestamp};

/// Message `n` (subject `Message {n}`, HTML `<p>Hello {n}</p>`, from
/// `hello@acme.example` to `reader{n}@example.org`) for the server on `127.0.0.1:port`,
/// opportunistic STARTTLS, no credentials. Tests change the fields they are about.
///
/// # Panics
/// Never: the fixed date parses.
pub fn loopback_mail(port: u16, n: u64) -> OutgoingMail {
    OutgoingMail {
        endpoint: SmtpEndpoint {
            host: "127.0.0.1".into(),
            port,
            security: SmtpSecurity::StartTlsOpportunistic,
            allow_insecure_tls: false,
            user: String::new(),
            password: SecretString::new(""),
            saved: None,
        },
        rendered: RenderedMessage {
            subject: format!("Message {n}"),
            html: format!("<p>Hello {n}</p>"),
            text: None,
            from: Mailbox {
                name: None,
                email: "hello@acme.example".into(),
            },
            to: Mailbox {
                name: None,
                email: format!("reader{n}@example.org"),
            },
            cc: None,
            bcc: None,
            reply_to: None,
            click_tracking: false,
            open_tracking: false,
        },
        message_id_header: format!("<m{n}@acme.example>"),
        date: Timestamp::parse("2026-11-22T12:00:00.000Z").expect("a valid timestamp"),
        list_unsubscribe: None,
        dkim: None,
        return_path: None,
    }
}
