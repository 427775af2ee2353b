use mailroom_domain::{contact::Contact, ContactId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// Clears the hard-bounce flag so the contact can receive mail again. The body rule
/// (exactly `{"hardBounced": false}`) is checked by the caller's parser.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact.
pub fn unbounce_contact(
    services: &Services,
    member: &Member,
    id: ContactId,
) -> Result<Contact, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        if !tx.clear_hard_bounce(account, id)? {
            return Err(AppError::NotFound);
        }
        tx.find_contact(account, id)?.ok_or(AppError::NotFound)
    })
}
