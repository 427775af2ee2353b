//! Building outbox rows: a transactional send and an automation make their rows here, so
//! they agree on ids, `Message-ID` and initial state. An announcement's audience is
//! queued by one `INSERT … SELECT` per batch in the store
//! (`AnnouncementRepository::queue_audience_batch`), which writes the same initial state
//! with ids made by the same source and the same `Message-ID` ([`message_id_domain`](mailroom_domain::message::message_id_domain)).

use mailroom_domain::{
    message::{message_id_header, Message, MessageKind, MessageStatus},
    paging::PageRequest,
    template::Template,
    AccountId, AutomationId, ContactId, MessageId, Timestamp,
};
use serde_json::{Map, Value};

use crate::{ports::UnitOfWork, AppError, Services};

/// What queued a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `POST …/messages`.
    Transactional,
    /// An automation's trigger.
    Automation(AutomationId),
}

/// The domain of the address a template's mail will come from: the template's own
/// `fromEmail`, else the default of the server it would use. Empty when neither exists
/// yet (the message will be skipped for want of a server, and its `Message-ID` falls
/// back to a reserved domain).
///
/// # Errors
/// [`AppError`] when the store fails.
pub(crate) fn sender_domain(
    tx: &mut dyn UnitOfWork,
    account: AccountId,
    template: &Template,
) -> Result<String, AppError> {
    let sender = match &template.from_email {
        Some(from) => Some(from.clone()),
        None => {
            let preferred = match template.preferred_mail_server {
                Some(id) => tx.find_mail_server(account, id)?,
                None => None,
            };
            let server = match preferred {
                Some(server) => Some(server),
                None => tx
                    .list_mail_servers(account, PageRequest { start: 0, limit: 1 })?
                    .into_iter()
                    .next(),
            };
            server.map(|record| record.server.default_from_email)
        }
    };
    Ok(sender
        .as_deref()
        .and_then(|address| address.rsplit_once('@'))
        .map_or_else(String::new, |(_, domain)| domain.to_owned()))
}

/// The recipient of a new message.
pub(crate) struct Addressee<'a> {
    /// The contact.
    pub contact: ContactId,
    /// Its address now (the log keeps it).
    pub email: &'a str,
}

/// A new `queued` message of `template` to `to`, due at `due`, with a fresh id and its
/// stable `Message-ID` in `domain`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn queued_message(
    services: &Services,
    account: AccountId,
    template: &Template,
    domain: &str,
    to: &Addressee<'_>,
    origin: Origin,
    data: Map<String, Value>,
    now: Timestamp,
    due: Timestamp,
) -> Message {
    let id = MessageId::from_uuid(services.ids.next_uuid());
    let (kind, automation_id) = match origin {
        Origin::Transactional => (MessageKind::Transactional, None),
        Origin::Automation(id) => (MessageKind::Automation, Some(id)),
    };
    Message {
        id,
        account_id: account,
        contact_id: to.contact,
        email: to.email.to_owned(),
        template_id: template.id,
        kind,
        status: MessageStatus::Queued,
        skip_reason: None,
        data,
        attempts: 0,
        next_attempt_at: Some(due),
        last_reply: None,
        message_id_header: message_id_header(id, domain),
        created_at: now,
        updated_at: now,
        sent_at: None,
        automation_id,
        announcement_id: None,
        test: false,
        form_id: None,
    }
}
