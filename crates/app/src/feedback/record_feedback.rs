use mailroom_domain::{
    contact::Contact,
    email::EmailAddress,
    feedback::{FeedbackKind, FeedbackReport},
    message::{message_id_in_header, Message, StatsCounter},
    suppression::{SuppressionReason, SuppressionSource},
    webhook_event::{ContactChange, ContactNotice},
    AccountId, ContactId, MessageId, Timestamp,
};

use super::parse::parse_feedback;
use crate::{
    auth::Member,
    messages::count,
    ports::{in_transaction, UnitOfWork},
    suppressions::{suppress, Listing},
    webhook_events::queue_webhook_event,
    AppError, Services,
};

/// What a report was, as the answer names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedbackType {
    /// A spam complaint (ARF `abuse`).
    Complaint,
    /// A permanent delivery failure (DSN `failed`, `5.x.x`).
    Bounce,
    /// A report that records nothing (a delay, a success, another feedback type).
    Ignored,
}

impl FeedbackType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complaint => "complaint",
            Self::Bounce => "bounce",
            Self::Ignored => "ignored",
        }
    }
}

/// What recording a report did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackOutcome {
    /// What the report was.
    pub kind: FeedbackType,
    /// The message it was matched to, if any (a report may match only a contact).
    pub message_id: Option<MessageId>,
    /// The contact it is about.
    pub contact_id: ContactId,
    /// Whether anything changed: `false` for an ignored report and for a repeat of a
    /// report already recorded.
    pub recorded: bool,
    /// Why an ignored report records nothing.
    pub reason: Option<String>,
}

/// Records a raw ARF complaint or DSN posted to `POST …/feedback`, in one transaction: a
/// complaint sets the contact's complaint time, counts `complained` and queues
/// `contact.complained`; a permanent failure makes a `sent` message `bounced`, flags the
/// contact hard-bounced, counts `bounced` and queues `contact.bounced`. Each only once: a
/// repeat of the same report changes, counts and queues nothing.
///
/// The report is matched by the original `Message-ID`, else by its recipient (the most
/// recent message to that address), else to the contact with that address.
///
/// A report acts on the contact only when it is about the contact: its recipient is the
/// message's address, or the message had no copies (its template names no `cc` or
/// `bcc`, so the contact was its only recipient). A report of a message with copies that
/// names another recipient, or none, is a copy refusal: it is noted on the message's last
/// reply, once, and the contact is left as it is.
///
/// # Errors
/// [`AppError::BadRequest`] when the body is not a report or matches nothing of the
/// account.
pub fn record_feedback(
    services: &Services,
    member: &Member,
    raw: &[u8],
) -> Result<FeedbackOutcome, AppError> {
    // Pure work first: no connection is held while a large body is parsed.
    let report = parse_feedback(raw).map_err(|error| AppError::BadRequest(error.0))?;
    record_report(services, member.account(), None, &report)
}

/// Records a report that reached Mailroom some other way than `POST …/feedback` (a DSN to
/// a VERP return-path address, a provider's bounce or complaint event) through the same
/// rules as [`record_feedback`]. The caller has already established which account it is
/// for (an HMAC-bound token, a verified provider signature). `known_message` is the
/// message the caller already knows the report is about (from a VERP token); when given,
/// the report's own `Message-ID` and recipient are not used to find another.
///
/// # Errors
/// [`AppError::BadRequest`] when the report matches nothing of the account.
pub fn record_report(
    services: &Services,
    account: AccountId,
    known_message: Option<MessageId>,
    report: &FeedbackReport,
) -> Result<FeedbackOutcome, AppError> {
    let now = services.clock.now();
    in_transaction(services.db.as_ref(), |tx| {
        let (message, contact) = find_target(tx, account, known_message, report)?;
        let message_id = message.as_ref().map(|message| message.id);
        if let Some(message) = &message {
            if let Some(copy) = copy_recipient(tx, account, message, report)? {
                return note_copy(tx, account, message, &contact, &copy, report, now);
            }
        }
        let outcome = |kind, recorded, reason| FeedbackOutcome {
            kind,
            message_id,
            contact_id: contact.id,
            recorded,
            reason,
        };
        match &report.kind {
            FeedbackKind::Complaint => {
                suppress(
                    tx,
                    services,
                    account,
                    &Listing {
                        email: &contact.email,
                        reason: SuppressionReason::Complaint,
                        source: SuppressionSource::FeedbackReport,
                        detail: None,
                        at: now,
                    },
                )?;
                let recorded = tx.mark_contact_complained(account, contact.id, now)?;
                if recorded {
                    count(tx, account, now, StatsCounter::Complained)?;
                    notify(
                        tx,
                        services,
                        account,
                        &contact,
                        now,
                        ContactChange::Complained,
                    )?;
                }
                Ok(outcome(FeedbackType::Complaint, recorded, None))
            }
            FeedbackKind::Bounce { diagnostic } => {
                let message_bounced = match &message {
                    Some(message) => {
                        tx.mark_sent_message_bounced(account, message.id, diagnostic, now)?
                    }
                    None => false,
                };
                suppress(
                    tx,
                    services,
                    account,
                    &Listing {
                        email: &contact.email,
                        reason: SuppressionReason::HardBounce,
                        source: SuppressionSource::FeedbackReport,
                        detail: Some(diagnostic),
                        at: now,
                    },
                )?;
                let contact_flagged = tx.mark_contact_hard_bounced(account, contact.id, now)?;
                if message_bounced || contact_flagged {
                    count(tx, account, now, StatsCounter::Bounced)?;
                }
                if contact_flagged {
                    let change = ContactChange::Bounced {
                        smtp_reply: diagnostic.clone(),
                    };
                    notify(tx, services, account, &contact, now, change)?;
                }
                let recorded = message_bounced || contact_flagged;
                Ok(outcome(FeedbackType::Bounce, recorded, None))
            }
            FeedbackKind::Ignored { reason } => {
                Ok(outcome(FeedbackType::Ignored, false, Some(reason.clone())))
            }
        }
    })
}

/// Who the report is about when it may not be the message's contact: its recipient, or
/// "a recipient the report does not name", when the message may have had copies and the
/// report does not name the message's address. `None` when it is about the contact.
fn copy_recipient(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    message: &Message,
    report: &FeedbackReport,
) -> Result<Option<String>, AppError> {
    if matches!(report.kind, FeedbackKind::Ignored { .. }) {
        return Ok(None);
    }
    if report
        .recipient
        .as_ref()
        .is_some_and(|recipient| recipient.normalized() == message.email.to_lowercase())
    {
        return Ok(None);
    }
    // The message's copies are not stored: its template says whether it had any (a
    // template that is gone may have had them). A message without copies had one
    // recipient, the contact: a report naming another address (a forward, an alias, a
    // redacted one) can only be about it.
    let copies = tx
        .find_template(account, message.template_id)?
        .is_none_or(|template| {
            [&template.cc, &template.bcc].into_iter().any(|field| {
                field
                    .as_deref()
                    .is_some_and(|value| !value.trim().is_empty())
            })
        });
    if !copies {
        return Ok(None);
    }
    Ok(Some(report.recipient.as_ref().map_or_else(
        || "a recipient the report does not name".to_owned(),
        ToString::to_string,
    )))
}

/// Records a report about one of the message's copies: a note on the message, once.
fn note_copy(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    message: &Message,
    contact: &Contact,
    copy: &str,
    report: &FeedbackReport,
    now: Timestamp,
) -> Result<FeedbackOutcome, AppError> {
    let (kind, what) = match &report.kind {
        FeedbackKind::Complaint => (FeedbackType::Complaint, "complained".to_owned()),
        FeedbackKind::Bounce { diagnostic } => {
            (FeedbackType::Bounce, format!("bounced ({diagnostic})"))
        }
        FeedbackKind::Ignored { reason } => {
            return Ok(FeedbackOutcome {
                kind: FeedbackType::Ignored,
                message_id: Some(message.id),
                contact_id: contact.id,
                recorded: false,
                reason: Some(reason.clone()),
            })
        }
    };
    let note = format!("late report: copy recipient {copy} {what}");
    let recorded = tx.note_copy_refusal(account, message.id, &note, now)?;
    Ok(FeedbackOutcome {
        kind,
        message_id: Some(message.id),
        contact_id: contact.id,
        recorded,
        reason: Some(format!(
            "the report is about {copy}, not the message's contact {}: noted on the \
             message, the contact is left as it is",
            message.email
        )),
    })
}

/// The message and contact the report is about: by `Message-ID`, else the latest message
/// to the recipient (or the quoted original's `To`), else the contact with the
/// recipient's address.
fn find_target(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    known_message: Option<MessageId>,
    report: &FeedbackReport,
) -> Result<(Option<Message>, Contact), AppError> {
    // A report the caller tied to a message (a VERP token) is about that message only:
    // if it is gone, the recipient the report's sender wrote is not trusted instead.
    let mut message = match known_message {
        Some(id) => Some(tx.find_message(account, id)?.ok_or_else(|| {
            AppError::BadRequest("the message the report is tied to no longer exists".into())
        })?),
        None => None,
    };
    if message.is_none() {
        // The header embeds the message's id (`<id@domain>`), so the key finds it; the
        // header must still match in full, as the quoted one may name another domain.
        let quoted = report.original_message_id.as_deref();
        if let Some(id) = quoted.and_then(message_id_in_header) {
            message = tx
                .find_message(account, id)?
                .filter(|found| Some(found.message_id_header.as_str()) == quoted);
        }
    }
    if message.is_none() {
        if let Some(recipient) = report.recipient.as_ref().or(report.original_to.as_ref()) {
            message = tx.find_latest_message_to(account, recipient)?;
        }
    }
    let contact_id = match (&message, &report.recipient) {
        (Some(message), _) => Some(message.contact_id),
        (None, Some(recipient)) => tx.find_contact_id_by_email(account, recipient)?,
        (None, None) => None,
    };
    let mut contact = match contact_id {
        Some(id) => tx.find_contact(account, id)?,
        None => None,
    };
    // Messages outlive their contact (migration 16): when the message's contact was
    // deleted, the report is about whoever holds the address now (a contact added
    // again), so a complaint or bounce still stops mail to it.
    if contact.is_none() {
        let address = message
            .as_ref()
            .and_then(|message| EmailAddress::parse(&message.email).ok());
        if let Some(address) = address {
            if let Some(id) = tx.find_contact_id_by_email(account, &address)? {
                contact = tx.find_contact(account, id)?;
            }
        }
    }
    let Some(contact) = contact else {
        return Err(AppError::BadRequest(no_match(report)));
    };
    Ok((message, contact))
}

fn no_match(report: &FeedbackReport) -> String {
    let mut clues = Vec::new();
    if let Some(header) = &report.original_message_id {
        clues.push(format!("Message-ID {header}"));
    }
    if let Some(recipient) = &report.recipient {
        clues.push(format!("recipient {recipient}"));
    }
    if clues.is_empty() {
        "the report names neither the original Message-ID nor a recipient".into()
    } else {
        format!(
            "the report matches no message or contact of this account ({})",
            clues.join(", ")
        )
    }
}

fn notify(
    tx: &mut dyn UnitOfWork,
    services: &Services,
    account: AccountId,
    contact: &Contact,
    now: Timestamp,
    change: ContactChange,
) -> Result<(), AppError> {
    queue_webhook_event(
        tx,
        services,
        &ContactNotice {
            account_id: account,
            contact_id: contact.id,
            email: contact.email.clone(),
            occurred_at: now,
            change,
        },
    )?;
    Ok(())
}
