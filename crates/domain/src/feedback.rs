//! Feedback reports: what a complaint (ARF, RFC 5965) or a delivery status notification
//! (DSN, RFC 3464) posted to `POST …/feedback` says, and the rules that decide what it
//! means for the message and the contact (docs/design.md#8-delivery).
//!
//! The MIME structure is taken apart elsewhere (the app crate, with a MIME parser); this
//! module reads the fields that structure yields: the feedback type, the per-recipient
//! `Action` and `Status`, the recipient and the original `Message-ID`. It decides what a
//! report is worth recording: a complaint of type `abuse`, or a permanent failure
//! (`Action: failed` with a `5.x.x` status). Everything else is reported back as ignored.

use crate::email::EmailAddress;

/// What a report asks the service to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedbackKind {
    /// The recipient marked the message as spam (`Feedback-Type: abuse`).
    Complaint,
    /// The message could not be delivered, for good (`Action: failed`, `Status: 5.x.x`).
    Bounce {
        /// What the receiving side said, for the message's last reply and the
        /// `contact.bounced` event: the `Diagnostic-Code` without its type
        /// (`550 5.1.1 … user unknown`), else the status (`5.1.1`).
        diagnostic: String,
    },
    /// Nothing to record: a delay, a success notice, or a feedback type that is not a
    /// complaint. Carries why, for the answer.
    Ignored {
        /// Why the report changes nothing, e.g. `action delayed with status 4.4.1`.
        reason: String,
    },
}

/// A parsed feedback report: what it says, and how to find the message it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackReport {
    /// What to record.
    pub kind: FeedbackKind,
    /// The original message's `Message-ID` in `<…>` form, when the report carries the
    /// original message or its headers.
    pub original_message_id: Option<String>,
    /// The recipient the report says it is about (`Original-Rcpt-To`,
    /// `Original-Recipient`, `Final-Recipient`, a provider event's recipient). Only this
    /// decides whether the report is about the message's contact or one of its copies.
    pub recipient: Option<EmailAddress>,
    /// The `To` of the original message the report quotes: used to find the message
    /// when nothing else does, never as the report's recipient (a report about a Cc or
    /// Bcc recipient quotes the same `To`).
    pub original_to: Option<EmailAddress>,
}

/// One per-recipient block of a delivery status notification (RFC 3464 §2.3), with the
/// fields that decide its meaning.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DsnRecipient {
    /// `Original-Recipient` (else `Final-Recipient`), as written: `rfc822; a@b.example`.
    pub recipient: Option<String>,
    /// `Action`: `failed`, `delayed`, `delivered`, `relayed` or `expanded`.
    pub action: Option<String>,
    /// `Status`: an RFC 3463 code such as `5.1.1`, possibly followed by a comment.
    pub status: Option<String>,
    /// `Diagnostic-Code`, as written: `smtp; 550 5.1.1 user unknown`.
    pub diagnostic_code: Option<String>,
}

impl DsnRecipient {
    /// What this block reports: a bounce for `Action: failed` with a status of class 5,
    /// else ignored with the reason.
    pub fn kind(&self) -> FeedbackKind {
        let action = self
            .action
            .as_deref()
            .map(|action| action.trim().to_ascii_lowercase())
            .unwrap_or_default();
        let status = self.status.as_deref().and_then(status_code);
        match (action.as_str(), status) {
            ("failed", Some((5, subject, detail))) => FeedbackKind::Bounce {
                diagnostic: self
                    .diagnostic_code
                    .as_deref()
                    .and_then(diagnostic_text)
                    .unwrap_or_else(|| format!("5.{subject}.{detail}")),
            },
            ("", _) => FeedbackKind::Ignored {
                reason: "the delivery status names no action".into(),
            },
            (action, Some((class, subject, detail))) => FeedbackKind::Ignored {
                reason: format!("action {action} with status {class}.{subject}.{detail}"),
            },
            (action, None) => FeedbackKind::Ignored {
                reason: format!("action {action} without a valid status"),
            },
        }
    }

    /// The address of the recipient field, when it is an RFC 822
    /// address.
    pub fn address(&self) -> Option<EmailAddress> {
        self.recipient.as_deref().and_then(typed_address)
    }
}

/// The block a report is about: the first permanent failure, else the first block.
pub fn deciding_recipient(recipients: &[DsnRecipient]) -> Option<&DsnRecipient> {
    recipients
        .iter()
        .find(|recipient| matches!(recipient.kind(), FeedbackKind::Bounce { .. }))
        .or_else(|| recipients.first())
}

/// What an ARF `Feedback-Type` asks for: `abuse` is a complaint; the other types
/// (`fraud`, `virus`, `not-spam`, `auth-failure`, `other`) record nothing.
pub fn complaint_kind(feedback_type: &str) -> FeedbackKind {
    let feedback_type = feedback_type.trim().to_ascii_lowercase();
    if feedback_type == "abuse" {
        FeedbackKind::Complaint
    } else if feedback_type.is_empty() {
        FeedbackKind::Ignored {
            reason: "the feedback report names no Feedback-Type".into(),
        }
    } else {
        FeedbackKind::Ignored {
            reason: format!("feedback type {feedback_type} is not a complaint"),
        }
    }
}

/// An RFC 3463 status code (`class.subject.detail`) at the start of `text`.
pub fn status_code(text: &str) -> Option<(u8, u16, u16)> {
    let word = text.split_whitespace().next()?;
    let mut parts = word.split('.');
    let class: u8 = parts.next()?.parse().ok()?;
    let subject: u16 = parts.next()?.parse().ok()?;
    let detail: u16 = parts.next()?.parse().ok()?;
    (parts.next().is_none() && matches!(class, 2 | 4 | 5)).then_some((class, subject, detail))
}

/// The text of a `Diagnostic-Code` without its type (`smtp; 550 …` → `550 …`), with
/// folded lines joined; `None` when empty.
pub fn diagnostic_text(code: &str) -> Option<String> {
    let text = code.split_once(';').map_or(code, |(_, text)| text);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some(text)
}

/// The address of a typed recipient field (`rfc822; a@b.example`, RFC 3464 §2.3.2). A
/// field without a type is read as an address too; another type (`x400; …`) is not.
pub fn typed_address(field: &str) -> Option<EmailAddress> {
    let address = match field.split_once(';') {
        Some((kind, address)) if kind.trim().eq_ignore_ascii_case("rfc822") => address,
        Some(_) => return None,
        None => field,
    };
    plain_address(address)
}

/// An address as a header or ARF field writes it: `a@b.example`, `<a@b.example>` or
/// `Name <a@b.example>`.
pub fn plain_address(text: &str) -> Option<EmailAddress> {
    let text = text.trim();
    let inner = match (text.rfind('<'), text.rfind('>')) {
        (Some(open), Some(close)) if open < close => &text[open + 1..close],
        _ => text,
    };
    EmailAddress::parse(inner.trim()).ok()
}

/// A `Message-ID` in the `<…>` form messages are stored with: the first `<…>` of the
/// field, or a bare `id@domain` wrapped in brackets; `None` when there is none.
pub fn message_id(field: &str) -> Option<String> {
    let field = field.trim();
    if let (Some(open), Some(close)) = (field.find('<'), field.find('>')) {
        let inner = field.get(open + 1..close)?.trim();
        return (!inner.is_empty() && open < close).then(|| format!("<{inner}>"));
    }
    let bare = field.split_whitespace().next()?;
    bare.contains('@').then(|| format!("<{bare}>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(action: &str, status: &str, diagnostic: Option<&str>) -> DsnRecipient {
        DsnRecipient {
            recipient: Some("rfc822; gone@example.org".into()),
            action: Some(action.into()),
            status: Some(status.into()),
            diagnostic_code: diagnostic.map(Into::into),
        }
    }

    #[test]
    fn a_failed_action_with_a_class_5_status_is_a_bounce_with_the_diagnostic() {
        let failed = block(
            "failed",
            "5.1.1",
            Some("smtp; 550 5.1.1 <gone@example.org>: Recipient address\r\n    rejected"),
        );
        assert_eq!(
            failed.kind(),
            FeedbackKind::Bounce {
                diagnostic: "550 5.1.1 <gone@example.org>: Recipient address rejected".into()
            }
        );
        assert_eq!(
            block("Failed", "5.2.2 (mailbox full)", None).kind(),
            FeedbackKind::Bounce {
                diagnostic: "5.2.2".into()
            }
        );
        assert_eq!(
            failed.address().map(|a| a.to_string()),
            Some("gone@example.org".into())
        );
    }

    #[test]
    fn delays_successes_and_contradictions_are_ignored() {
        for (action, status) in [
            ("delayed", "4.4.1"),
            ("delivered", "2.0.0"),
            ("relayed", "2.0.0"),
            ("failed", "4.4.7"),
            ("failed", "not a status"),
            ("", "5.1.1"),
        ] {
            assert!(
                matches!(
                    block(action, status, None).kind(),
                    FeedbackKind::Ignored { .. }
                ),
                "{action} {status}"
            );
        }
        let delayed = block("delayed", "4.4.1", None).kind();
        assert_eq!(
            delayed,
            FeedbackKind::Ignored {
                reason: "action delayed with status 4.4.1".into()
            }
        );
    }

    #[test]
    fn the_first_permanent_failure_decides_a_report_of_several_recipients() {
        let delayed = block("delayed", "4.4.1", None);
        let failed = block("failed", "5.1.1", None);
        let both = [delayed.clone(), failed.clone()];
        assert_eq!(deciding_recipient(&both), Some(&failed));
        assert_eq!(
            deciding_recipient(std::slice::from_ref(&delayed)),
            Some(&delayed)
        );
        assert_eq!(deciding_recipient(&[]), None);
    }

    #[test]
    fn only_abuse_is_a_complaint() {
        assert_eq!(complaint_kind(" Abuse "), FeedbackKind::Complaint);
        assert!(matches!(
            complaint_kind("not-spam"),
            FeedbackKind::Ignored { .. }
        ));
        assert!(matches!(complaint_kind(""), FeedbackKind::Ignored { .. }));
    }

    #[test]
    fn addresses_and_message_ids_are_read_in_their_usual_spellings() {
        let address = |text| typed_address(text).map(|a| a.to_string());
        assert_eq!(address("rfc822; a@b.example"), Some("a@b.example".into()));
        assert_eq!(address("RFC822;<a@b.example>"), Some("a@b.example".into()));
        assert_eq!(address("a@b.example"), Some("a@b.example".into()));
        assert_eq!(address("x400; /G=a/S=b/"), None);
        assert_eq!(address("rfc822; not an address"), None);
        assert_eq!(
            plain_address("Ada Lovelace <Ada@B.example>").map(|a| a.to_string()),
            Some("Ada@B.example".into())
        );
        assert_eq!(
            message_id(" <0193@acme.example> (comment)"),
            Some("<0193@acme.example>".into())
        );
        assert_eq!(
            message_id("0193@acme.example"),
            Some("<0193@acme.example>".into())
        );
        assert_eq!(message_id("<>"), None);
        assert_eq!(message_id("junk"), None);
        assert_eq!(message_id("> <"), None);
        assert_eq!(status_code("5.7.1 (policy)"), Some((5, 7, 1)));
        assert_eq!(status_code("6.0.0"), None);
        assert_eq!(diagnostic_text("smtp;   "), None);
    }
}
