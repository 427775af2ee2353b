//! Takes a raw feedback message apart with mail-parser: finds the machine-readable part
//! (`message/feedback-report` of an ARF, `message/delivery-status` of a DSN) and the
//! original message or its headers (`message/rfc822`, `text/rfc822-headers`), and hands
//! their fields to the domain's rules ([`mailroom_domain::feedback`]).
//!
//! Pure and total: any byte string gives a report or a reason it is not one, never a
//! panic (mail-parser promises not to panic, and nothing here indexes unchecked).

use mail_parser::{Message, MessageParser, MessagePart, MimeHeaders};
use mailroom_domain::{
    email::EmailAddress,
    feedback::{
        complaint_kind, deciding_recipient, message_id, plain_address, DsnRecipient, FeedbackReport,
    },
};

/// Why a body is not a feedback report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotAReport(pub String);

/// Reads an ARF complaint (RFC 5965) or a DSN (RFC 3464) from the raw message.
///
/// # Errors
/// [`NotAReport`] saying what is missing: no MIME message, no report part, or a DSN
/// without per-recipient fields.
pub fn parse_feedback(raw: &[u8]) -> Result<FeedbackReport, NotAReport> {
    let message = MessageParser::new()
        .parse(raw)
        .filter(|message| !message.headers().is_empty())
        .ok_or_else(|| NotAReport("the body is not an email message".into()))?;
    let original = original_message(&message);
    if let Some(report) = part_of_type(&message, &[("message", "feedback-report")]) {
        let fields = Fields::parse(report.contents());
        let recipient = fields.get("Original-Rcpt-To").and_then(plain_address);
        return Ok(FeedbackReport {
            kind: complaint_kind(fields.get("Feedback-Type").unwrap_or_default()),
            original_message_id: original.message_id,
            recipient,
            original_to: original.to,
        });
    }
    let status_types = [
        ("message", "delivery-status"),
        ("message", "global-delivery-status"),
    ];
    if let Some(status) = part_of_type(&message, &status_types) {
        let recipients = dsn_recipients(status.contents());
        let deciding = deciding_recipient(&recipients)
            .ok_or_else(|| NotAReport("the delivery status has no per-recipient fields".into()))?;
        return Ok(FeedbackReport {
            kind: deciding.kind(),
            original_message_id: original.message_id,
            recipient: deciding.address(),
            original_to: original.to,
        });
    }
    Err(NotAReport(
        "the body is not a feedback report: it has no message/feedback-report (ARF) or \
         message/delivery-status (DSN) part"
            .into(),
    ))
}

/// The first part (below the root) whose content type is one of `types`.
fn part_of_type<'m, 'x>(
    message: &'m Message<'x>,
    types: &[(&str, &str)],
) -> Option<&'m MessagePart<'x>> {
    message.parts.iter().skip(1).find(|part| {
        part.content_type().is_some_and(|content_type| {
            types.iter().any(|(ctype, subtype)| {
                content_type.ctype().eq_ignore_ascii_case(ctype)
                    && content_type
                        .subtype()
                        .is_some_and(|sub| sub.eq_ignore_ascii_case(subtype))
            })
        })
    })
}

/// What the report tells of the original message.
#[derive(Default)]
struct Original {
    message_id: Option<String>,
    to: Option<EmailAddress>,
}

/// The original message (`message/rfc822`) or its headers (`text/rfc822-headers`).
fn original_message(message: &Message<'_>) -> Original {
    let types = [
        ("message", "rfc822"),
        ("message", "global"),
        ("text", "rfc822-headers"),
        ("message", "rfc822-headers"),
        ("message", "global-headers"),
    ];
    let Some(part) = part_of_type(message, &types) else {
        return Original::default();
    };
    match part.message() {
        Some(nested) => original_of(nested),
        None => MessageParser::new()
            .parse_headers(part.contents())
            .map(|headers| original_of(&headers))
            .unwrap_or_default(),
    }
}

fn original_of(message: &Message<'_>) -> Original {
    Original {
        message_id: message.header_raw("Message-ID").and_then(message_id),
        to: message
            .to()
            .and_then(|to| to.first())
            .and_then(|addr| addr.address())
            .and_then(plain_address),
    }
}

/// The per-recipient blocks of a `message/delivery-status` body: the blocks after the
/// first (the per-message fields), separated by blank lines.
fn dsn_recipients(body: &[u8]) -> Vec<DsnRecipient> {
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .skip(1)
        .map(|block| {
            let fields = Fields::parse(block.as_bytes());
            DsnRecipient {
                // The address as we gave it (ORCPT) beats the one an alias rewrote it to.
                recipient: fields
                    .get("Original-Recipient")
                    .or_else(|| fields.get("Final-Recipient"))
                    .map(str::to_owned),
                action: fields.get("Action").map(str::to_owned),
                status: fields.get("Status").map(str::to_owned),
                diagnostic_code: fields.get("Diagnostic-Code").map(str::to_owned),
            }
        })
        .filter(|recipient| recipient.action.is_some() || recipient.recipient.is_some())
        .collect()
}

/// Header-style fields (`Name: value`, folded lines joined), as mail-parser reads a
/// header block; names compare without case.
struct Fields(Vec<(String, String)>);

impl Fields {
    fn parse(block: &[u8]) -> Self {
        let fields = MessageParser::new()
            .parse_headers(block)
            .map(|headers| {
                headers
                    .headers_raw()
                    .map(|(name, value)| {
                        let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
                        (name.to_owned(), value)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self(fields)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use mailroom_domain::feedback::FeedbackKind;

    use super::*;

    const MESSAGE_ID: &str = "<01936c5e-7b2a-7cde-8f00-0123456789ab@acme.example>";

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../tests/fixtures/feedback/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{path}: {error}"))
            .replace("{{MESSAGE_ID}}", MESSAGE_ID)
            .replace("{{RECIPIENT}}", "Grace@Example.org")
            .into_bytes()
    }

    fn recipient(report: &FeedbackReport) -> Option<String> {
        report.recipient.as_ref().map(ToString::to_string)
    }

    #[test]
    fn a_yahoo_arf_is_a_complaint_with_the_original_message_id_and_recipient() {
        let report = parse_feedback(&fixture("arf-yahoo.eml")).expect("a report");
        assert_eq!(report.kind, FeedbackKind::Complaint);
        assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
        assert_eq!(recipient(&report).as_deref(), Some("Grace@Example.org"));
    }

    #[test]
    fn an_arf_with_headers_only_and_no_message_id_still_names_the_recipient() {
        let report = parse_feedback(&fixture("arf-headers-only.eml")).expect("a report");
        assert_eq!(report.kind, FeedbackKind::Complaint);
        assert_eq!(report.original_message_id, None);
        assert_eq!(recipient(&report).as_deref(), Some("Grace@Example.org"));
    }

    #[test]
    fn a_postfix_bounce_is_a_permanent_failure_with_its_diagnostic() {
        let report = parse_feedback(&fixture("dsn-postfix.eml")).expect("a report");
        assert_eq!(
            report.kind,
            FeedbackKind::Bounce {
                diagnostic: "550 5.1.1 <Grace@Example.org>: Recipient address rejected: \
                             User unknown in virtual mailbox table"
                    .into()
            }
        );
        assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
        assert_eq!(recipient(&report).as_deref(), Some("Grace@Example.org"));
    }

    #[test]
    fn a_delay_notice_is_ignored() {
        let report = parse_feedback(&fixture("dsn-delayed.eml")).expect("a report");
        assert_eq!(
            report.kind,
            FeedbackKind::Ignored {
                reason: "action delayed with status 4.4.1".into()
            }
        );
        assert_eq!(report.original_message_id.as_deref(), Some(MESSAGE_ID));
    }

    #[test]
    fn bodies_that_are_not_reports_are_refused_with_a_reason() {
        for body in [
            &b""[..],
            b"\x00\x01\x02",
            b"just some text",
            b"{\"json\": true}",
            b"From: a@b.example\r\nSubject: hi\r\n\r\nhello",
            b"Content-Type: multipart/report; report-type=delivery-status; boundary=x\r\n\r\n--x\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx\r\n\r\n--x--\r\n",
        ] {
            assert!(parse_feedback(body).is_err(), "{body:?}");
        }
    }

    #[test]
    fn a_dsn_names_the_recipient_as_sent_rather_than_as_an_alias_rewrote_it() {
        let raw = "From: MAILER-DAEMON@mx.example.net\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n\
             --b\r\nContent-Type: message/delivery-status\r\n\r\n\
             Reporting-MTA: dns; mx.example.net\r\n\r\n\
             Final-Recipient: rfc822; delivered@example.net\r\nAction: delayed\r\nStatus: 4.4.1\r\n\r\n\
             Final-Recipient: rfc822; mailbox@example.net\r\n\
             Original-Recipient: rfc822; alias@example.org\r\nAction: failed\r\nStatus: 5.2.1\r\n\
             --b--\r\n";
        let report = parse_feedback(raw.as_bytes()).expect("a report");
        assert_eq!(
            report.kind,
            FeedbackKind::Bounce {
                diagnostic: "5.2.1".into()
            }
        );
        assert_eq!(recipient(&report).as_deref(), Some("alias@example.org"));
        assert_eq!(report.original_message_id, None);
    }

    #[test]
    fn an_arf_inside_base64_is_read_too() {
        // base64 of "Feedback-Type: abuse\r\nOriginal-Rcpt-To: ada@example.org\r\n".
        let encoded =
            "RmVlZGJhY2stVHlwZTogYWJ1c2UNCk9yaWdpbmFsLVJjcHQtVG86IGFkYUBleGFtcGxlLm9yZw0K";
        let raw = format!(
            "From: fbl@isp.example\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/report; report-type=feedback-report; boundary=b\r\n\r\n\
             --b\r\nContent-Type: message/feedback-report\r\nContent-Transfer-Encoding: base64\r\n\r\n\
             {encoded}\r\n--b--\r\n"
        );
        let report = parse_feedback(raw.as_bytes()).expect("a report");
        assert_eq!(report.kind, FeedbackKind::Complaint);
        assert_eq!(recipient(&report).as_deref(), Some("ada@example.org"));
    }
}
