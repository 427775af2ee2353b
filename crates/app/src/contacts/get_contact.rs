use mailroom_domain::{attribute::ResolvedAttributes, contact::Contact, AccountId, ContactId};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One contact with its resolved attributes.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact; [`AppError::Unauthorized`] for a non-member.
pub fn get_contact(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    id: ContactId,
) -> Result<(Contact, ResolvedAttributes), AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        let contact = tx.find_contact(account, id)?.ok_or(AppError::NotFound)?;
        let attributes = tx
            .resolved_attributes(account, &[id])?
            .remove(&id)
            .unwrap_or_default();
        Ok((contact, attributes))
    })
}
