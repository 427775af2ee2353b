//! A person's data as one document (the right of access and of portability): the
//! contact and its attributes, its address's entries on the suppression list, then every
//! event and every message, read a page at a time so that memory stays at one page
//! whatever the person's history.

use mailroom_domain::{
    attribute::ResolvedAttributes, contact::Contact, message::Message, message::MessageFilter,
    message::MessageOrder, paging::PageRequest, suppression::SuppressionEntry, ContactId,
};

use crate::{
    auth::Member,
    ports::{in_transaction, ContactEvent},
    suppressions::existing_key,
    AppError, Services,
};

/// The number of events or messages read in one transaction of an export.
pub const EXPORT_PAGE: u32 = mailroom_domain::paging::MAX_LIMIT;

/// What an export starts with, read in one transaction.
#[derive(Debug, Clone)]
pub struct ContactExportHead {
    /// The contact (its topic unsubscriptions and marks included).
    pub contact: Contact,
    /// Its attributes, resolved.
    pub attributes: ResolvedAttributes,
    /// Its address's entries on the suppression list.
    pub suppressions: Vec<SuppressionEntry>,
}

/// The contact, its attributes and its address's suppression entries.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact (or another account's).
pub fn contact_export_head(
    services: &Services,
    member: &Member,
    id: ContactId,
) -> Result<ContactExportHead, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let contact = tx.find_contact(account, id)?.ok_or(AppError::NotFound)?;
        let attributes = super::resolve_contact_attributes(tx, account, &contact)?;
        let suppressions = match existing_key(tx, services, account)? {
            Some(key) => tx.find_suppressions(account, key.hash(&contact.email))?,
            None => Vec::new(),
        };
        Ok(ContactExportHead {
            contact,
            attributes,
            suppressions,
        })
    })
}

/// The page of the contact's events starting at `start`, newest first.
///
/// # Errors
/// [`AppError::NotFound`] once the contact is gone.
pub fn contact_export_events(
    services: &Services,
    member: &Member,
    id: ContactId,
    start: u64,
) -> Result<Vec<ContactEvent>, AppError> {
    let page = PageRequest {
        start,
        limit: EXPORT_PAGE,
    };
    super::list_contact_events(services, member, id, page)
}

/// The page of the messages to the contact starting at `start`, in the log's order.
///
/// # Errors
/// [`AppError::NotFound`] once the contact is gone.
pub fn contact_export_messages(
    services: &Services,
    member: &Member,
    id: ContactId,
    start: u64,
) -> Result<Vec<Message>, AppError> {
    let account = member.account();
    let filter = MessageFilter {
        contact_id: Some(id),
        ..MessageFilter::default()
    };
    let page = PageRequest {
        start,
        limit: EXPORT_PAGE,
    };
    in_transaction(services.db.as_ref(), |tx| {
        tx.find_contact(account, id)?.ok_or(AppError::NotFound)?;
        Ok(tx.list_messages(account, &filter, MessageOrder::OldestFirst, page)?)
    })
}
