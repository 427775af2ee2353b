use mailroom_domain::{attribute::ResolvedAttributes, contact::Contact, ContactId};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One contact with its resolved attributes.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact.
pub fn get_contact(
    services: &Services,
    member: &Member,
    id: ContactId,
) -> Result<(Contact, ResolvedAttributes), AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        let contact = tx.find_contact(account, id)?.ok_or(AppError::NotFound)?;
        let attributes = super::resolve_contact_attributes(tx, account, &contact)?;
        Ok((contact, attributes))
    })
}
