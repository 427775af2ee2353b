use mailroom_domain::{contact::Contact, AccountId, ContactId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// Clears the hard-bounce flag so the contact can receive mail again. The body rule
/// (exactly `{"hardBounced": false}`) is checked by the caller's parser.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact; [`AppError::Unauthorized`] for a non-member.
pub fn unbounce_contact(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: ContactId,
) -> Result<Contact, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        if !tx.clear_hard_bounce(account, id)? {
            return Err(AppError::NotFound);
        }
        tx.find_contact(account, id)?.ok_or(AppError::NotFound)
    })
}
