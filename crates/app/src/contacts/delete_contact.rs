use mailroom_domain::{contact::Contact, AccountId, ContactId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Deletes a contact with its events, attributes and unsubscriptions, and returns it.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact; [`AppError::Unauthorized`] for a non-member.
pub fn delete_contact(services: &Services, actor: &Actor, account: AccountId, id: ContactId) -> Result<Contact, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        let contact = tx.find_contact(account, id)?.ok_or(AppError::NotFound)?;
        tx.delete_contact(account, id)?;
        // The webhooks issue writes the `contact.deleted` event here, in this transaction.
        Ok(contact)
    })
}
