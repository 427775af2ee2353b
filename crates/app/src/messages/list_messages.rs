use mailroom_domain::{
    message::{Message, MessageFilter},
    paging::PageRequest,
    AccountId,
};

use crate::{auth::require_member, ports::in_transaction, Actor, AppError, Services};

/// One page of the account's message log, oldest first, filtered by status and contact.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn list_messages(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    filter: &MessageFilter,
    page: PageRequest,
) -> Result<Vec<Message>, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.list_messages(account, filter, page)?)
    })
}

/// How many messages the log shows under the same filters.
///
/// # Errors
/// [`AppError::Unauthorized`] for a non-member.
pub fn count_messages(
    services: &Services,
    actor: &Actor,
    account: AccountId,
    filter: &MessageFilter,
) -> Result<u64, AppError> {
    in_transaction(services.db.as_ref(), |tx| {
        require_member(tx, actor, account)?;
        Ok(tx.count_messages(account, filter)?)
    })
}
