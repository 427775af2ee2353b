use mailroom_domain::{contact::Contact, ContactId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Deletes a contact with its events, attributes and unsubscriptions, and returns it.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact.
pub fn delete_contact(
    services: &Services,
    member: &Member,
    id: ContactId,
) -> Result<Contact, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let contact = tx.find_contact(account, id)?.ok_or(AppError::NotFound)?;
        tx.delete_contact(account, id)?;
        // In this transaction, so the event exists exactly when the deletion does.
        let notice = mailroom_domain::webhook_event::ContactNotice {
            account_id: account,
            contact_id: id,
            email: contact.email.clone(),
            occurred_at: services.clock.now(),
            change: mailroom_domain::webhook_event::ContactChange::Deleted,
        };
        crate::webhook_events::queue_webhook_event(tx, services, &notice)?;
        Ok(contact)
    })
}
