use mailroom_domain::{
    contact::{Contact, ContactQuery},
    paging::PageRequest,
};

use crate::{auth::Member, ports::in_transaction, AppError, Services};

/// One page of the contact list, filtered and sorted as `query` says.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn list_contacts(
    services: &Services,
    member: &Member,
    query: &ContactQuery,
    page: PageRequest,
) -> Result<Vec<Contact>, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.list_contacts(account, query, page)?)
    })
}

/// How many contacts the list shows under the same filters.
///
/// # Errors
/// [`AppError`] when the store fails.
pub fn count_contacts(
    services: &Services,
    member: &Member,
    query: &ContactQuery,
) -> Result<u64, AppError> {
    let account = member.account();
    in_transaction(services.db.as_ref(), |tx| {
        Ok(tx.count_contacts(account, query)?)
    })
}
