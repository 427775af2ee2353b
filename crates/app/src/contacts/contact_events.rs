use mailroom_domain::{paging::PageRequest, ContactId};

use crate::{
    auth::Member,
    ports::{in_transaction, ContactEvent},
    AppError, Services,
};

/// One page of a contact's events, newest first.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown contact (or another account's);
/// [`AppError`] when the store fails.
pub fn list_contact_events(
    services: &Services,
    member: &Member,
    contact: ContactId,
    page: PageRequest,
) -> Result<Vec<ContactEvent>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        // An unknown contact is a 404, not an empty page, as for the contact itself.
        tx.find_contact(account, contact)?
            .ok_or(AppError::NotFound)?;
        Ok(tx.list_contact_events(account, contact, page)?)
    })
}
