use mailroom_domain::{
    contact::{Contact, ContactQuery},
    paging::PageRequest,
    AccountId,
};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One page of the contact list, filtered and sorted as `query` says.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn list_contacts(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    query: &ContactQuery,
    page: PageRequest,
) -> Result<Vec<Contact>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.list_contacts(account, query, page)?)
    })
}

/// How many contacts the list shows under the same filters.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn count_contacts(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    query: &ContactQuery,
) -> Result<u64, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.count_contacts(account, query)?)
    })
}
